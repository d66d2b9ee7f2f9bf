"""unilab-eval builds the play variant with the training overrides that can carry over: one that
drops or sets an entry the play variant itself removed is dropped (and listed), not refused."""

import pytest
from unilab_rl.cli.evaluate import _env_overrides

unilab = pytest.importorskip("unilab")
from unilab.registry import task_config  # noqa: E402


@pytest.mark.parametrize("task, trained", [
    # docs/tasks.md: drop the curriculum to train a fixed range; the play variant has none
    ("g1_walk_flat_play", {"curriculum.command_ranges": None}),
    # a run trained without pushes; the play variant has no push either
    ("g1_walk_flat_play", {"events.push": None}),
    # a reset-noise range; the play variant's reset_from_motion keeps only the command name
    ("g1_motion_tracking_play", {"events.reset_from_motion.params.joint_position_range": "(-0.2, 0.2)"}),
])
def test_a_training_override_of_an_entry_the_play_variant_removed_is_dropped(task, trained):
    overrides, dropped = _env_overrides(task, {**trained, "rewards.velocity.weights.alive": "2.0"}
                                        if task.startswith("g1_walk") else trained, {})
    assert dropped == list(trained)
    task_config(task, overrides)  # the evaluation env's config builds


def test_overrides_the_play_variant_can_take_still_carry_over():
    trained = {"rewards.velocity.weights.alive": "2.0", "backend_options.nconmax": "64", "episode_length_s": "5"}
    overrides, dropped = _env_overrides("g1_walk_flat_play", trained, {})
    assert dropped == ["episode_length_s"]  # the protocol's own setting
    assert overrides == {"rewards.velocity.weights.alive": "2.0", "backend_options.nconmax": "64"}


def test_a_run_resumed_with_another_execution_setting_is_still_one_run(tmp_path):
    """Snapshots before a resume that turned on ``profile_phases`` (how the env ran, not what it
    computed) and the checkpoint after it are judged and exported as one run."""
    import torch
    from unilab_rl.checkpoint import save_checkpoint
    from unilab_rl.cli.judged import run_checkpoints

    document = {"task": "g1_walk_flat", "backend": "mujoco", "algo": "fastsac", "env_overrides": {},
                "algo_config": {}, "spec": {}, "agent": {"w": torch.zeros(2)}, "rng": {},
                "counters": {"env_steps": 100, "wall_s": 1.0}, "env": {}}
    save_checkpoint(tmp_path / "checkpoint-100steps.pt", document)
    save_checkpoint(tmp_path / "checkpoint.pt", {**document, "env_overrides": {"profile_phases": "true"},
                                                 "counters": {"env_steps": 200, "wall_s": 2.0}})
    assert [p.name for p, _ in run_checkpoints(tmp_path)] == ["checkpoint-100steps.pt", "checkpoint.pt"]
