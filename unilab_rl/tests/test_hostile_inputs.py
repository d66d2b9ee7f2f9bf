"""An adversarial user's report, each case replayed: files that would run code when loaded,
links planted where a run writes, outputs that name a device, interrupts before training,
a full disk, rewards that overflow, sizes that exhaust memory or threads, a changed task."""

import json
import os

import pytest
import torch
from fake_env import PointMassEnv
from unilab_rl.cli import ppo as ppo_cli

TINY_PPO = ["actor.hidden_dims=[16,16]", "critic.hidden_dims=[16,16]", "num_steps_per_env=8",
            "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]


def point_factory(task, *, backend, num_envs, device, seed, overrides):
    return PointMassEnv(num_envs=num_envs, seed=seed)


def ppo_args(out, iterations, *extra):
    return ["--task", "point", "--backend", "fake", "--num-envs", "4", "--iterations", str(iterations),
            "--out", str(out), "--export", "none", *TINY_PPO, *extra]


class WritesMarker:
    """Unpickled by a loader that runs code, this writes ``marker`` through a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("flag", ["--resume", "--play"])
def test_ppo_refuses_a_model_whose_unpickling_would_run_code(tmp_path, capsys, flag):
    pytest.importorskip("rsl_rl")
    first = tmp_path / "first"
    assert ppo_cli.main(ppo_args(first, 1), factory=point_factory) == 0
    model = first / json.loads((first / "run.json").read_text())["model"]
    saved = torch.load(model, weights_only=True)
    marker = tmp_path / "marker"
    crafted = first / "model_crafted.pt"
    torch.save({**saved, "infos": {**saved["infos"], "payload": WritesMarker(marker)}}, crafted)
    capsys.readouterr()
    out = tmp_path / "run"
    argv = ppo_args(out, 1, "--resume", str(crafted)) if flag == "--resume" else ["--play", str(crafted), "--episodes", "1"]
    assert ppo_cli.main(argv, factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    assert not marker.exists()
    err = capsys.readouterr().err
    assert f"unilab-ppo: error: {flag} {crafted}: refused" in err, err
    assert not out.exists()
    # The run's own model still loads both ways.
    assert ppo_cli.main(["--play", str(model), "--episodes", "1", "--num-envs", "2"], factory=point_factory) == 0
    assert ppo_cli.main(ppo_args(tmp_path / "resumed", 1, "--resume", str(model)), factory=point_factory) == 0


# --- links planted where a run writes --------------------------------------------------------

def train_refused(capsys, argv, *fragments):
    from test_cli import run_train
    from unilab_rl.cli import train as train_cli

    capsys.readouterr()
    assert run_train(argv) == train_cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("unilab-train: error: "), err
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.mark.parametrize("name", [".unilab-train.lock", "metrics.jsonl", "checkpoint.pt", "run.json",
                                  "summary.json", "tensorboard"])
def test_a_link_planted_where_a_run_writes_is_refused_and_its_target_untouched(tmp_path, capsys, name):
    from test_cli import TINY_TOKENS, base_args

    out, victim, dangling = tmp_path / "run", tmp_path / "victim.txt", tmp_path / "elsewhere" / "created"
    out.mkdir()
    victim.write_text("precious\n")
    (out / name).symlink_to(victim)
    train_refused(capsys, base_args(out) + TINY_TOKENS, f"{out / name} is a symbolic link")
    assert victim.read_text() == "precious\n"
    (out / name).unlink()
    (out / name).symlink_to(dangling)  # a dangling link: the run would create a file outside --out
    train_refused(capsys, base_args(out) + TINY_TOKENS, f"{out / name} is a symbolic link")
    assert not dangling.parent.exists()
    assert sorted(p.name for p in out.iterdir()) == [name]


def test_run_files_are_opened_without_following_a_link_planted_after_the_checks(tmp_path):
    from unilab_rl.cli.metrics_sink import TrainingSink
    from unilab_rl.cli.run_dir import LOCK_NAME, RunDirError, RunDirLock

    out, victim = tmp_path / "run", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("precious\n")
    (out / LOCK_NAME).symlink_to(victim)
    with pytest.raises(RunDirError, match="symbolic link"):
        RunDirLock(out)
    (out / "metrics.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(RunDirError, match="symbolic link"):
        TrainingSink(out, tensorboard=False)
    assert victim.read_text() == "precious\n" and not (tmp_path / "outside.jsonl").exists()


# --- outputs that are not the run's own ------------------------------------------------------

@pytest.mark.parametrize("flag", ["--summary-json", "--curve-json"])
@pytest.mark.parametrize("kind", ["fifo", "link", "dangling link"])
def test_a_json_output_that_is_not_a_regular_file_or_new_is_refused_before_training(tmp_path, capsys, flag, kind):
    import stat

    from test_cli import TINY_TOKENS, base_args

    path, target, out = tmp_path / "out.json", tmp_path / "target.json", tmp_path / "run"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        if kind == "link":
            target.write_text("precious\n")
        path.symlink_to(target)
    train_refused(capsys, base_args(out) + [flag, str(path), *TINY_TOKENS], f"{flag} {path} is not a regular file")
    assert stat.S_ISFIFO(os.lstat(path).st_mode) if kind == "fifo" else path.is_symlink()
    assert (target.read_text() == "precious\n") if kind == "link" else not target.exists()
    assert not out.exists()


# --- PPO into a directory that holds a run ---------------------------------------------------

def test_ppo_into_a_directory_holding_a_run_is_refused_unless_overwrite(tmp_path, capsys):
    pytest.importorskip("rsl_rl")
    import hashlib

    out = tmp_path / "run"
    assert ppo_cli.main(ppo_args(out, 1, "runner.save_interval=1"), factory=point_factory) == 0
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    assert ppo_cli.main(ppo_args(out, 2), factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"unilab-ppo: error: --out {out} already holds a run (" in err and "--overwrite" in err, err
    assert "model_0.pt" in err and "run.json" in err
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in out.iterdir() if p.is_file()} == before
    # Resuming the directory's newest model into it continues that run.
    model = out / json.loads((out / "run.json").read_text())["model"]
    assert ppo_cli.main(ppo_args(out, 1, "--resume", str(model)), factory=point_factory) == 0
    # --overwrite replaces the old run: none of its models is left beside the new one's.
    assert ppo_cli.main(ppo_args(out, 1, "--overwrite"), factory=point_factory) == 0
    assert sorted(p.name for p in out.glob("model_*.pt")) == ["model_0.pt"]
    # A unilab-train run's directory is refused too (its run.json would be replaced).
    train_dir = tmp_path / "train"
    train_dir.mkdir()
    (train_dir / "checkpoint.pt").write_bytes(b"x")
    assert ppo_cli.main(ppo_args(train_dir, 1), factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    assert "already holds a run (checkpoint.pt)" in capsys.readouterr().err


# --- SIGINT before the training loop's handler -----------------------------------------------

@pytest.mark.slow  # six launches, ~14 s on 2 cores
def test_sigint_during_start_up_ends_the_process_before_training(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    pytest.importorskip("unilab")
    codes = []
    for trial, delay in enumerate((0.1, 0.2, 0.25, 0.3, 0.4, 0.6)):  # inside `import torch`, and after it
        out = tmp_path / f"run{trial}"
        command = [sys.executable, "-m", "unilab_rl.cli.train", "--task", "g1_walk_flat", "--backend", "mujoco",
                   "--num-envs", "2", "--steps", "200", "--out", str(out), "--no-progress", "--no-tensorboard",
                   "--algo", "fastsac", "batch_size=32", "learning_starts=64", "actor_width=16", "critic_width=16"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        codes.append(process.returncode)
        # Killed by the signal (before Python's own start-up finished) or exit 130; never trained.
        assert process.returncode in (130, -signal.SIGINT), (delay, process.returncode, err[-2000:])
        assert not (out / "checkpoint.pt").exists() and not (out / "summary.json").exists(), delay
    assert 130 in codes


# --- a full disk -----------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["oserror", "torch runtimeerror"])
def test_a_save_on_a_full_disk_names_the_file_and_keeps_the_earlier_checkpoint(tmp_path, capsys, monkeypatch, form):
    import errno

    from test_cli import TINY_TOKENS, base_args, run_train
    from unilab_rl.checkpoint import load_checkpoint

    out = tmp_path / "run"
    real_save, saves = torch.save, []

    def full_after_the_first(obj, stream, *args, **kwargs):
        saves.append(1)
        if len(saves) == 1:
            return real_save(obj, stream, *args, **kwargs)
        stream.write(b"partial")
        if form == "oserror":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1152 vs 1046")

    monkeypatch.setattr(torch, "save", full_after_the_first)
    tokens = [t for t in TINY_TOKENS if not t.startswith("checkpoint_every")] + ["checkpoint_every=10"]
    capsys.readouterr()
    assert run_train(base_args(out) + tokens) == 1
    err = capsys.readouterr().err
    assert f"unilab-train: error: no space left on device writing {out / 'checkpoint.pt'}" in err, err
    assert load_checkpoint(out / "checkpoint.pt")["counters"]  # the earlier save is intact
    assert not list(out.glob(".checkpoint*.tmp"))  # the partial temporary file is removed
