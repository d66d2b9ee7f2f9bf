"""Run records and the honest CLI surface: OUT/run.json holds the resolved configuration and
``--config`` runs it again; ``--resume`` takes the algorithm from its checkpoint; ``--help``
and ``--list-tasks`` say what exists; progress without a terminal prints as lines; a video
without its GL library is bad input, not a traceback."""

import json

import pytest
import torch
from fake_env import PointMassEnv
from helpers import TINY
from unilab_rl.checkpoint import load_checkpoint
from unilab_rl.cli import play as play_cli
from unilab_rl.cli import run_record
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.run_record import RECORD_FORMAT, git_commit, versions

TASKS = ["fake_task", "other_task"]


def fake_factory(task, *, backend, num_envs, device, seed, overrides):
    if backend != "fake":
        raise ValueError(f"unknown backend {backend!r}; valid backends: ['fake']")
    return PointMassEnv(num_envs=num_envs, seed=seed, max_episode_length=int(overrides.get("max_episode_length", 20)))


def run_train(argv):
    return train_cli.main(argv, factory=fake_factory, tasks=TASKS)


def tokens(algo):
    return [f"{k}={v}" for k, v in TINY[algo].items()] + ["log_every=4", "checkpoint_every=1000"]


def first_run(out, algo="fastsac"):
    argv = ["--task", "fake_task", "--backend", "fake", "--algo", algo, "--num-envs", "8", "--seed", "7",
            "--steps", "160", "--out", str(out), "--no-tensorboard", "--goal", "collector/episode_return>-100",
            *tokens(algo), "max_episode_length=10", "timing_sample_every=3"]
    assert run_train(argv) == 0
    return json.loads((out / "run.json").read_text())


def test_the_run_record_holds_the_resolved_configuration_and_provenance(tmp_path):
    record = first_run(tmp_path / "run")
    assert record["format"] == RECORD_FORMAT
    assert (record["task"], record["backend"], record["algo"], record["num_envs"], record["seed"]) == (
        "fake_task", "fake", "fastsac", 8, 7)
    assert record["budget"] == {"steps": 160, "minutes": None}
    trained = load_checkpoint(tmp_path / "run" / "checkpoint.pt")["algo_config"]
    assert record["algo_config"] == json.loads(json.dumps(trained))  # every field, as validated
    assert record["runner_config"] == {"log_every": 4, "checkpoint_every": 1000, "timing_sample_every": 3,
                                       "snapshot_at_s": [], "snapshot_at_steps": [],
                                       "overlap_learning": False, "env_stream_priority": -5}
    assert record["env_overrides"] == {"max_episode_length": "10"}
    assert record["goals"] == ["collector/episode_return>-100"]
    assert record["versions"]["torch"] and "unilab-rl" in record["versions"]
    assert record["git_commit"] == git_commit() and record["command"][0]
    assert record["task_fingerprint"] is None  # a task unilab does not know (the injected fake)


def test_config_runs_the_record_again_and_the_command_line_wins(tmp_path):
    record = first_run(tmp_path / "run")
    again = tmp_path / "again"
    assert run_train(["--config", str(tmp_path / "run" / "run.json"), "--out", str(again), "--no-tensorboard",
                      "--num-envs", "4", "gamma=0.9"]) == 0
    rerun = json.loads((again / "run.json").read_text())
    assert rerun["num_envs"] == 4 and rerun["algo_config"]["gamma"] == 0.9  # given here: wins
    unchanged = ("task", "backend", "algo", "seed", "budget", "runner_config", "env_overrides", "goals")
    assert {k: rerun[k] for k in unchanged} == {k: record[k] for k in unchanged}
    assert {k: v for k, v in rerun["algo_config"].items() if k != "gamma"} == {
        k: v for k, v in record["algo_config"].items() if k != "gamma"}
    assert load_checkpoint(again / "checkpoint.pt")["counters"]["env_steps"] == 160


def test_config_keeps_the_run_directory_guarantees(tmp_path, capsys):
    first_run(tmp_path / "run")
    record = tmp_path / "run" / "run.json"
    assert run_train(["--config", str(record), "--out", str(tmp_path / "run")]) == train_cli.EXIT_BAD_INPUT
    assert "already holds a run" in capsys.readouterr().err
    assert run_train(["--config", str(record), "--preset", "gpu_walk", "--out", str(tmp_path / "x")]) == 2
    assert "--preset with --config" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{}")
    assert run_train(["--config", str(tmp_path / "bad.json"), "--out", str(tmp_path / "y")]) == 2
    assert "not a run record written by unilab-train" in capsys.readouterr().err
    assert run_train(["--config", str(tmp_path / "missing.json"), "--out", str(tmp_path / "z")]) == 2
    assert not any((tmp_path / name).exists() for name in ("x", "y", "z"))


@pytest.mark.parametrize(("field", "value"), [
    ("num_envs", "8"), ("seed", "zero"), ("budget", None), ("env_overrides", ["a"]), ("algo_config", [1, 2]),
    ("runner_config", 3), ("goals", "x"), ("task", 3), ("num_envs", True),
])
def test_config_with_a_field_of_the_wrong_type_is_refused_naming_it(tmp_path, capsys, field, value):
    first_run(tmp_path / "run")
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    record[field] = value
    (tmp_path / "edited.json").write_text(json.dumps(record))
    assert run_train(["--config", str(tmp_path / "edited.json"), "--out", str(tmp_path / "again")]) == 2
    err = capsys.readouterr().err
    assert f"the run record's fields have the wrong types ({field}=" in err and "Traceback" not in err, err
    assert not (tmp_path / "again").exists()


def test_resume_takes_the_algorithm_and_the_run_from_the_checkpoint(tmp_path):
    out = tmp_path / "run"
    first_run(out, algo="fastsac")
    # No --task, --backend, --algo, --num-envs: the checkpoint's (FlashSAC is the default algorithm).
    assert run_train(["--resume", str(out / "checkpoint.pt"), "--out", str(out), "--steps", "80",
                      "--no-tensorboard"]) == 0
    record = json.loads((out / "run.json").read_text())
    assert (record["algo"], record["task"], record["num_envs"], record["seed"]) == ("fastsac", "fake_task", 8, 7)
    assert record["resumed_from"] == str(out / "checkpoint.pt")
    assert load_checkpoint(out / "checkpoint.pt")["counters"]["env_steps"] == 240


def test_help_shows_defaults_and_lists_tasks_backends_and_algorithms(capsys):
    with pytest.raises(SystemExit):
        train_cli.build_parser(TASKS, ["fake"]).parse_args(["--help"])
    shown = capsys.readouterr().out
    for text in ("tasks: fake_task, other_task", "backends: fake", "algorithms: fastsac, flashsac",
                 "presets: gpu_track, gpu_track_walk_run, gpu_walk", "default g1_walk_flat", "default mujoco", "default flashsac", "default 64",
                 "default 0", "default runs/train", "rewards.velocity.weights.alive=2", "3 the learner diverged"):
        assert text in shown, text
    assert run_train(["--list-tasks"]) == 0
    assert capsys.readouterr().out.split() == TASKS


def test_without_a_terminal_progress_prints_as_lines(tmp_path, capsys):
    argv = ["--task", "fake_task", "--backend", "fake", "--algo", "fastsac", "--num-envs", "8", "--steps", "160",
            "--out", str(tmp_path / "run"), "--no-tensorboard", *tokens("fastsac")]
    assert run_train(argv) == 0  # no --no-progress; pytest's captured stdout is not a terminal
    captured = capsys.readouterr()
    assert "\r" not in captured.out + captured.err  # no bar redrawn in place
    lines = [line for line in captured.out.splitlines() if line.startswith("[")]
    assert lines and "env_steps=" in lines[0] and "%" in lines[0]


def test_versions_name_the_simulators_and_packages(monkeypatch):
    found = versions()
    assert {"torch", "mujoco", "mujoco-warp", "warp-lang", "genesis-world", "unisim-core", "unilab",
            "unilab-rl"} <= set(found)
    # The keys come from the package list whatever is installed; the values are what is.
    assert found["torch"] == torch.__version__ and found["unilab-rl"]
    monkeypatch.setattr(run_record, "PACKAGES", ("torch", "not-an-installed-package"))
    assert versions()["not-an-installed-package"] is None


def test_a_video_without_its_gl_library_is_bad_input_naming_the_fix(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    monkeypatch.setattr(play_cli.ctypes.util, "find_library", lambda name: None)
    code = play_cli.main(["--checkpoint", str(tmp_path / "missing.pt"), "--video", str(tmp_path / "v.mp4")],
                         factory=fake_factory)
    assert code == play_cli.EXIT_BAD_INPUT
    error = capsys.readouterr().err
    assert "MUJOCO_GL=osmesa needs the OSMesa library" in error and "apt-get install libosmesa6" in error


@pytest.mark.parametrize(("extra", "message"), [
    (["--tolerance", "nan"], "--tolerance must be a finite number >= 0"),
    (["--verify-steps", "-1"], "--verify-steps must be >= 0"),
    (["--format", "torchscript", "--out", "policy.onnx"], "a torchscript policy file ends in .pt"),
])
def test_export_refuses_bad_arguments_before_reading_the_checkpoint(tmp_path, capsys, extra, message):
    from unilab_rl.cli import export as export_cli

    assert export_cli.main(["--checkpoint", str(tmp_path / "missing.pt"), *extra]) == export_cli.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_learning_beside_collection_on_the_host_is_bad_input_that_names_the_setting(tmp_path, capsys):
    # The gpu presets turn it on for FastSAC; on a CPU device the run must stop before it
    # claims --out, saying which setting to drop.
    argv = ["--task", "fake_task", "--backend", "fake", "--algo", "fastsac", "--num-envs", "8", "--steps", "16",
            "--out", str(tmp_path / "run"), "--no-tensorboard", *tokens("fastsac"), "overlap_learning=true"]
    assert run_train(argv) == 2
    err = capsys.readouterr().err
    assert "overlap_learning=true needs a CUDA device" in err and "overlap_learning=false" in err
    assert not (tmp_path / "run").exists()


def test_learning_beside_collection_with_several_processes_fails_before_any_rank_starts(tmp_path, capsys, monkeypatch):
    launched = []
    monkeypatch.setattr(train_cli, "launch_torchrun", lambda *a: launched.append(a) or 0)
    argv = ["--task", "fake_task", "--backend", "fake", "--algo", "fastsac", "--nproc", "2", "--steps", "16",
            "--out", str(tmp_path / "run"), *tokens("fastsac"), "overlap_learning=true"]
    assert run_train(argv) == 2
    assert "overlap_learning=true runs in one process only" in capsys.readouterr().err and launched == []
    assert run_train([a for a in argv if a != "overlap_learning=true"]) == 0 and len(launched) == 1
