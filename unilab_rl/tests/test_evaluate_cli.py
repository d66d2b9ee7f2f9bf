"""unilab-eval runs the checkpoint task's own evaluation, on several backends side by side."""

from __future__ import annotations

import json

import pytest
import torch
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import train as train_cli

QUICK = ["eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]


@pytest.fixture(scope="module")
def g1_checkpoint(tmp_path_factory):
    pytest.importorskip("unilab")
    out = tmp_path_factory.mktemp("eval") / "run"
    args = ["--task", "g1_walk_flat", "--backend", "mujoco", "--algo", "fastsac", "--num-envs", "4", "--steps", "32",
            "--out", str(out), "--no-progress", "--no-tensorboard", "batch_size=16", "learning_starts=16",
            "actor_width=16", "critic_width=16"]
    assert train_cli.main(args) == 0
    torch.set_num_threads(1)
    return out / "checkpoint.pt"


def test_the_sweep_runs_on_two_backends_and_reports_every_command(g1_checkpoint, tmp_path, capsys):
    out = tmp_path / "eval"
    code = eval_cli.main(["--checkpoint", str(g1_checkpoint), "--backends", "mujoco,mjwarp", "--out", str(out), *QUICK])
    assert code == 1  # a 32-step policy does not walk: it ran and failed
    report = json.loads((out / "report.json").read_text())
    assert report["evaluated_on"] == "g1_walk_flat_play" and set(report["reports"]) == {"mujoco", "mjwarp"}
    mujoco, mjwarp = report["reports"]["mujoco"], report["reports"]["mjwarp"]
    assert [c["command"] for c in mujoco["cases"]] == [c["command"] for c in mjwarp["cases"]]
    assert len(mujoco["cases"]) == 17 and report["evaluation_options"]["seconds"] == "0.4"
    assert (out / "report.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "mujoco: FAILED" in printed and "mjwarp: FAILED" in printed


@pytest.mark.parametrize(("extra", "message"), [
    (["--backends", "mujoco,mujoco"], "distinct comma-separated backend names"),
    (["eval.envs=3"], "evaluation options ['envs'] are unknown"),
    (["--task", "nope"], "unknown task 'nope'"),
    (["rewards.nope=1"], "valid keys"),
])
def test_bad_input_is_exit_2_naming_it(g1_checkpoint, tmp_path, capsys, extra, message):
    assert eval_cli.main(["--checkpoint", str(g1_checkpoint), "--out", str(tmp_path / "e"), *QUICK, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_training_overrides_of_terms_the_play_variant_removed_are_dropped_and_reported(g1_checkpoint, tmp_path,
                                                                                      capsys):
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    document = load_checkpoint(g1_checkpoint)
    stages = "[{'step': 0, 'lin_vel_x': (-1.5, 2.0)}]"
    document["env_overrides"] = {**document["env_overrides"], "curriculum.command_ranges.params.stages": stages,
                                 "events.push.interval_range_s": "(2.0, 3.0)", "episode_length_s": "30"}
    path = tmp_path / "with-curriculum.pt"
    save_checkpoint(path, document)
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(path), "--out", str(out), *QUICK]) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["training_overrides_dropped"] == ["curriculum.command_ranges.params.stages",
                                                    "events.push.interval_range_s"]
    assert report["env_overrides"]["episode_length_s"] == "30"  # one the play variant has is kept
    assert "dropped: curriculum.command_ranges.params.stages, events.push.interval_range_s" in capsys.readouterr().out
