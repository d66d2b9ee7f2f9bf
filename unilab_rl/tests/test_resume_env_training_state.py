"""A resumed run continues its env where the checkpoint left it: the step count a curriculum
reads (real env, mujoco, CPU), and a checkpoint without the env's state is not resumed."""

import pytest
import torch
from helpers import TINY
from unilab_rl.algorithms import build_agent, build_config
from unilab_rl.checkpoint import ENV_STATE_KEY, CheckpointError, load_checkpoint
from unilab_rl.contract import EnvSpec
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig

unilab = pytest.importorskip("unilab")

TASK = "g1_walk_flat"
WIDEN = 6  # vectorized env steps before the forward command range widens
OVERRIDES = {"curriculum.command_ranges.params.stages": [
    {"step": 0, "lin_vel_x": (-1.0, 1.0), "ang_vel_z": (-1.0, 1.0)}, {"step": WIDEN, "lin_vel_x": (-1.5, 2.0)}]}


def _runner(out):
    env = unilab.make_manager_based_rl_env(TASK, backend="mujoco", num_envs=4, seed=0, overrides=OVERRIDES)
    config = build_config("fastsac", TINY["fastsac"])
    agent = build_agent("fastsac", EnvSpec.from_env(env), config, torch.device("cpu"))
    return OffPolicyRunner(env, agent, config, RunIdentity(TASK, "mujoco", "fastsac", 0, OVERRIDES), out,
                           runner_config=RunnerConfig(log_every=100, checkpoint_every=1000))


def test_a_resumed_run_keeps_the_curriculum_stage_it_reached(tmp_path):
    first = _runner(tmp_path)
    try:
        first.train(max_env_steps=10 * 4)  # 10 vectorized steps: past the widening
        assert first.env.command_manager.term("twist", "test").ranges[0] == (-1.5, 2.0)
    finally:
        first.env.close()
    document = load_checkpoint(tmp_path / "checkpoint.pt")
    assert document[ENV_STATE_KEY]["step_counter"] == 10

    resumed = _runner(None)
    try:
        resumed.restore(document)
        resumed.train(max_env_steps=resumed.env_steps + 2 * 4)
        # The uninterrupted run's env would have counted 12 steps and kept the widened range.
        assert resumed.env.common_step_counter == resumed.iterations == 12
        assert resumed.env.command_manager.term("twist", "test").ranges[0] == (-1.5, 2.0)
    finally:
        resumed.env.close()

    older = _runner(None)  # a checkpoint written before the env's state was saved
    try:
        del document[ENV_STATE_KEY]
        with pytest.raises(CheckpointError, match="no env training state"):
            older.restore(document)
        assert older.env_steps == 0 and older.env.common_step_counter == 0
    finally:
        older.env.close()


def test_a_learner_state_that_does_not_fit_leaves_the_envs_training_state_as_it_was(tmp_path):
    first = _runner(tmp_path)
    try:
        first.train(max_env_steps=10 * 4)
    finally:
        first.env.close()
    document = load_checkpoint(tmp_path / "checkpoint.pt")
    del document["agent"]["actor"]  # the learner refuses it, after the env's state was taken
    other = _runner(None)
    try:
        with pytest.raises(KeyError):
            other.restore(document)
        assert other.env.common_step_counter == 0
        assert other.env.command_manager.term("twist", "test").ranges[0] == (-1.0, 1.0)
    finally:
        other.env.close()
