"""unilab-train --seeds refuses bad input before it starts a seed or creates anything under --out,
and never truncates what an earlier start left there."""

import json
import subprocess
import sys

import pytest
from unilab_rl.cli import seeds
from unilab_rl.cli import train as train_cli

TINY = ["--backend", "mujoco", "--num-envs", "4", "--steps", "40", "batch_size=32", "learning_starts=64",
        "actor_width=32", "critic_width=32"]


class FakeSeed:
    """Stands in for one seed's training process: records its command, writes a line to
    its log and ends at once with ``code``."""

    started: list[list[str]] = []
    code = 0

    def __init__(self, command, log):
        FakeSeed.started.append(command)
        log.write("fake seed ran\n")
        self.returncode = FakeSeed.code

    def poll(self):
        return self.returncode


@pytest.fixture
def fake_seeds(monkeypatch):
    FakeSeed.started, FakeSeed.code = [], 0
    monkeypatch.setattr(seeds, "start_process", FakeSeed)
    return FakeSeed


def test_a_bad_override_exits_2_and_creates_nothing_under_out(tmp_path, fake_seeds, capsys):
    pytest.importorskip("unilab")
    fake_seeds.code = 2  # what each seed's process would exit with
    out = tmp_path / "out"
    assert train_cli.main(["--seeds", "0,1", "--out", str(out), *TINY, "bogus_key=1"]) == 2
    assert not out.exists() and fake_seeds.started == []
    error = capsys.readouterr().err
    assert "seed 0" in error and "bogus_key" in error


def test_a_bad_algorithm_value_exits_2_and_creates_nothing_under_out(tmp_path, fake_seeds, capsys):
    pytest.importorskip("unilab")
    fake_seeds.code = 2
    out = tmp_path / "out"
    assert train_cli.main(["--seeds", "0,1", "--out", str(out), *TINY, "batch_size=banana"]) == 2
    assert not out.exists() and fake_seeds.started == []
    assert "batch_size" in capsys.readouterr().err


def test_evaluation_options_without_eval_are_refused_before_any_seed_starts(tmp_path, fake_seeds, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        train_cli.main(["--seeds", "0,1", "--out", str(out), *TINY, "eval.seconds=3"])
    assert exit_info.value.code == 2 and not out.exists() and fake_seeds.started == []
    assert "evaluation options need --eval" in capsys.readouterr().err


def test_an_evaluation_option_the_seeds_would_refuse_exits_2_before_any_seed_starts(tmp_path, fake_seeds, capsys):
    pytest.importorskip("unilab")
    out = tmp_path / "out"
    assert train_cli.main(["--seeds", "0,1", "--out", str(out), "--eval", *TINY, "eval.no_such_option=1"]) == 2
    assert not out.exists() and fake_seeds.started == []
    error = capsys.readouterr().err
    assert "seed 0" in error and "no_such_option" in error


def test_an_out_whose_seed_folder_holds_a_run_is_refused_and_its_files_survive(tmp_path, fake_seeds, capsys):
    pytest.importorskip("unilab")
    fake_seeds.code = 2  # each seed's process would refuse its run directory itself
    out = tmp_path / "out"
    for seed in (0, 1):  # a finished --seeds run: each seed's run, its log, and the table
        run = out / f"seed-{seed}"
        run.mkdir(parents=True)
        (run / "checkpoint.pt").write_bytes(b"trained")
        (run / "metrics.jsonl").write_text("{}\n")
        (out / f"seed-{seed}" / "log.txt").write_text(f"seed {seed} trained for 40 env steps\n")
    (out / "seeds.json").write_text(json.dumps({"seeds": [{"seed": 0, "exit_code": 0}, {"seed": 1, "exit_code": 0}]}))
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert train_cli.main(["--seeds", "0,1", "--out", str(out), *TINY]) == 2
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before
    assert fake_seeds.started == []
    error = capsys.readouterr().err
    assert "seed 0" in error and "already holds a run" in error


def test_a_seed_started_again_appends_to_its_log(tmp_path, fake_seeds):
    pytest.importorskip("unilab")
    out = tmp_path / "out"
    (out / "seed-1").mkdir(parents=True)
    (out / "seed-1" / "log.txt").write_text("an earlier start that built nothing\n")
    _, tasks = train_cli.default_env_factory()
    assert seeds.run_side_by_side([0, 1], out, ["--preset", "gpu_walk", *TINY], tasks, None) == 0
    assert [command[command.index("--seed") + 1] for command in fake_seeds.started] == ["0", "1"]
    log = (out / "seed-1" / "log.txt").read_text()
    assert log.startswith("an earlier start that built nothing\n") and log.endswith("fake seed ran\n")
    assert (out / "seed-0" / "log.txt").read_text() == "fake seed ran\n"
    assert [row["exit_code"] for row in json.loads((out / "seeds.json").read_text())["seeds"]] == [0, 0]


def test_the_real_command_with_a_bad_override_exits_2_and_creates_nothing(tmp_path):
    pytest.importorskip("unilab")
    out = tmp_path / "gws"
    result = subprocess.run([sys.executable, "-m", "unilab_rl.cli.train", "--seeds", "0,1", "--out", str(out),
                             *TINY, "bogus_key=1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and not out.exists()
    assert "seed 0" in result.stderr and "bogus_key" in result.stderr
