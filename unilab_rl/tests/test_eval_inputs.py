"""unilab-eval judges a policy under its task's protocol, not under the training run's settings,
and refuses bad input (exit 2, naming it) before it builds anything."""

from __future__ import annotations

import json

import pytest
import torch
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import train as train_cli

# 1.5 s of sweep from the first step: long enough for a barely trained policy to fall.
SWEEP = ["--no-plot", "eval.envs_per_command=1", "eval.settle_s=0", "eval.seconds=1.5"]


def _train(out, task, *extra):
    args = ["--task", task, "--backend", "mujoco", "--algo", "fastsac", "--out", str(out), "--no-progress",
            "--no-tensorboard", "actor_width=16", "critic_width=16", *extra]
    assert train_cli.main(args) == 0
    torch.set_num_threads(1)
    return out / "checkpoint.pt"


@pytest.fixture(scope="module")
def short_episodes(tmp_path_factory):
    """A walking run trained with 0.5-s episodes: shorter than the sweep judging it."""
    pytest.importorskip("unilab")
    return _train(tmp_path_factory.mktemp("short") / "run", "g1_walk_flat", "--num-envs", "4", "--steps", "32",
                  "batch_size=16", "learning_starts=16", "episode_length_s=0.5")


def test_a_training_episode_length_neither_times_out_the_sweep_nor_hides_its_falls(short_episodes, tmp_path):
    reports = {}
    for name, extra in (("as trained", []), ("long episodes", ["episode_length_s=1000000"])):
        assert eval_cli.main(["--checkpoint", str(short_episodes), "--out", str(tmp_path / name), *SWEEP,
                              *extra]) == 1
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    falls = {name: [c["fall_rate"] for c in r["reports"]["mujoco"]["cases"]] for name, r in reports.items()}
    assert any(falls["long episodes"])  # the policy does fall within the sweep...
    assert falls["as trained"] == falls["long episodes"]  # ...and a 0.5-s time-out no longer resets it upright
    trained = reports["as trained"]
    assert "episode_length_s" in trained["training_overrides_dropped"]
    assert "episode_length_s" not in trained["env_overrides"]


def test_episodes_given_here_that_end_within_the_sweep_are_refused_naming_them(short_episodes, tmp_path, capsys):
    out = tmp_path / "e"
    assert eval_cli.main(["--checkpoint", str(short_episodes), "--out", str(out), *SWEEP,
                          "episode_length_s=1.0"]) == 2
    assert "episode_length_s" in capsys.readouterr().err
    assert not out.exists()


def test_a_variant_with_its_own_policy_observations_is_judged_on_its_own_play_variant(tmp_path, capsys):
    pytest.importorskip("unilab")
    checkpoint = _train(tmp_path / "run", "g1_motion_tracking_no_state_estimation", "--num-envs", "2", "--steps", "4",
                        "batch_size=8", "learning_starts=8")
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(checkpoint), "--out", str(out), "--no-plot",
                          "eval.envs_per_clip=1"]) == 1  # it ran: a 4-step policy does not track the clip
    report = json.loads((out / "report.json").read_text())
    assert report["evaluated_on"] == "g1_motion_tracking_no_state_estimation_play"
    assert len(report["reports"]["mujoco"]["cases"]) == 1
    assert "checkpoint was trained with observations" not in capsys.readouterr().err


@pytest.mark.parametrize("under", [False, True])
def test_an_out_that_is_a_file_is_refused_before_anything_is_loaded_or_built(tmp_path, capsys, monkeypatch, under):
    def never(*args, **kwargs):
        raise AssertionError("loaded or built before --out was checked")

    monkeypatch.setattr(eval_cli, "judged_checkpoints", never)
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    out = afile / "sub" if under else afile
    assert eval_cli.main(["--checkpoint", str(tmp_path / "checkpoint.pt"), "--out", str(out), *SWEEP]) == 2
    assert f"--out {out}" in capsys.readouterr().err
    assert afile.read_text() == "keep me"


def test_an_env_override_is_routed_as_unilab_train_routes_it_and_a_misspelled_one_is_refused(short_episodes, capsys):
    assert eval_cli.main(["--checkpoint", str(short_episodes), *SWEEP, "episode_lenght_s=30"]) == 2
    captured = capsys.readouterr()
    assert "did you mean env.episode_length_s?" in captured.err and "building" not in captured.out
    assert eval_cli.main(["--checkpoint", str(short_episodes), *SWEEP, "env.episode_lenght_s=30"]) == 2
    assert "unknown env key 'episode_lenght_s'; did you mean env.episode_length_s?" in capsys.readouterr().err
