"""A task of the user's own package: ``--task package.module:task_name`` on every CLI, the
``unilab.tasks`` entry-point group, and a run that finds its task again from what it recorded."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from unilab_rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import export as export_cli
from unilab_rl.cli import play as play_cli
from unilab_rl.cli import ppo as ppo_cli
from unilab_rl.cli import train as train_cli

pytest.importorskip("unilab")

SPEC = "user_tasks_pkg.tasks:g1_walk_flat_no_gait"
TINY = ["--backend", "mujoco", "--algo", "fastsac", "--num-envs", "4", "--no-progress", "--no-tensorboard",
        "batch_size=16", "learning_starts=16", "actor_width=16", "critic_width=16"]
QUICK = ["eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1", "eval.commands=[(0.0,0.0,0.0)]"]


def forget_user_tasks() -> None:
    """As a new process sees it: the user's module not imported, its tasks not registered."""
    from unilab import evaluation, registry

    for name in ("g1_walk_flat_no_gait", "g1_walk_flat_no_gait_play"):
        registry._TASKS.pop(name, None)
        evaluation._EVALUATIONS.pop(name, None)
    registry._REGISTERED_BY.pop("user_tasks_pkg.tasks", None)
    sys.modules.pop("user_tasks_pkg.tasks", None)


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    forget_user_tasks()
    out = tmp_path_factory.mktemp("user") / "run"
    assert train_cli.main(["--task", SPEC, "--steps", "32", "--out", str(out), *TINY]) == 0
    torch.set_num_threads(1)
    return out


def test_a_user_task_trains_and_records_its_module(user_run):
    assert json.loads((user_run / "run.json").read_text())["task"] == SPEC
    assert load_checkpoint(user_run / "checkpoint.pt")["task"] == SPEC


def test_play_eval_and_export_find_the_task_from_the_checkpoint(user_run, tmp_path, capsys):
    forget_user_tasks()
    assert play_cli.main(["--checkpoint", str(user_run / "checkpoint.pt"), "--num-envs", "2", "--episodes", "1"]) == 0
    forget_user_tasks()
    code = eval_cli.main(["--checkpoint", str(user_run / "checkpoint.pt"), "--no-plot", "--out",
                          str(tmp_path / "eval"), *QUICK])
    assert code in (0, 1)  # judged (a 32-step policy does not walk)
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["evaluated_on"] == "g1_walk_flat_no_gait_play"
    forget_user_tasks()
    policy = tmp_path / "policy.pt"
    assert export_cli.main(["--checkpoint", str(user_run / "checkpoint.pt"), "--format", "torchscript",
                            "--out", str(policy), "--verify-steps", "4"]) == 0
    metadata = json.loads(policy.with_suffix(".json").read_text())
    assert metadata["task"] == SPEC
    forget_user_tasks()
    assert eval_cli.main(["--policy", str(policy), "--no-plot", *QUICK]) in (0, 1)


def test_resume_and_config_find_the_task_from_the_run(user_run, tmp_path):
    forget_user_tasks()
    assert train_cli.main(["--resume", str(user_run / "checkpoint.pt"), "--steps", "8", "--out",
                           str(tmp_path / "resumed"), "--no-progress", "--no-tensorboard"]) == 0
    forget_user_tasks()
    assert train_cli.main(["--config", str(user_run / "run.json"), "--steps", "8", "--out",
                           str(tmp_path / "again"), "--no-progress", "--no-tensorboard"]) == 0
    assert json.loads((tmp_path / "again" / "run.json").read_text())["task"] == SPEC


@pytest.mark.parametrize(("task", "named"), [
    ("user_tasks_pkg.missing:g1_walk_flat_no_gait", ["module 'user_tasks_pkg.missing' not found",
                                                     "g1_walk_flat_no_gait"]),
    ("user_tasks_pkg.tasks:no_such_task", ["module 'user_tasks_pkg.tasks' registers no task 'no_such_task'",
                                           "g1_walk_flat_no_gait_play"]),
    ("user_tasks_pkg.broken:some_task", ["importing module 'user_tasks_pkg.broken' (for task 'some_task') failed",
                                         "a_dependency_nobody_installed"]),
    ("g1_walk_flat_no_such", ["unknown task 'g1_walk_flat_no_such'", "package.module:task_name"]),
])
def test_a_bad_task_exits_2_naming_the_module_and_the_task(task, named, tmp_path, capsys):
    commands = [
        (train_cli.main, ["--task", task, "--steps", "8", "--out", str(tmp_path / "run"), *TINY]),
        (ppo_cli.main, ["--task", task, "--iterations", "1", "--out", str(tmp_path / "ppo")]),
    ]
    for main, argv in commands:
        assert main(argv) == 2
        err = capsys.readouterr().err
        for text in named:
            assert text in err, (main.__module__, err)
    assert not (tmp_path / "run").exists()


def test_play_takes_the_module_for_a_checkpoint_that_recorded_a_bare_name(user_run, tmp_path, capsys):
    from unilab_rl.checkpoint import INTEGRITY_KEY

    document = load_checkpoint(user_run / "checkpoint.pt")
    document["task"] = "g1_walk_flat_no_gait"  # a run whose task was registered by the script that trained it
    document.pop(INTEGRITY_KEY)
    save_checkpoint(tmp_path / "bare.pt", document)
    forget_user_tasks()
    assert play_cli.main(["--checkpoint", str(tmp_path / "bare.pt"), "--num-envs", "2", "--episodes", "1"]) == 2
    assert "unknown task 'g1_walk_flat_no_gait'" in capsys.readouterr().err
    assert play_cli.main(["--checkpoint", str(tmp_path / "bare.pt"), "--num-envs", "2", "--episodes", "1",
                          "--task", SPEC]) == 0
    assert play_cli.main(["--checkpoint", str(tmp_path / "bare.pt"), "--task", "user_tasks_pkg.listed:user_listed_task"]) == 2
    assert "trained on task 'g1_walk_flat_no_gait', not 'user_listed_task'" in capsys.readouterr().err


def test_an_installed_package_lists_its_tasks_through_the_entry_point_group(tmp_path, monkeypatch, capsys):
    from unilab import registry

    dist = tmp_path / "user_tasks_listed-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-tasks-listed\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[unilab.tasks]\nlisted = user_tasks_pkg.listed\n"
                                           "broken = user_tasks_pkg.broken\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    assert train_cli.main(["--list-tasks"]) == 0
    captured = capsys.readouterr()
    assert "user_listed_task" in captured.out.split()
    assert "g1_walk_flat" in captured.out.split()
    assert "entry point 'broken'" in captured.err and "a_dependency_nobody_installed" in captured.err
