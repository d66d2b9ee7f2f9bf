"""What the collector stores around quarantined rows and env-only steps."""

from __future__ import annotations

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.collector import Collector
from unilab_rl.contract import EnvSpec
from unilab_rl.replay import ReplayBuffer
from unilab_rl.timing import SampledPhaseTimer

GAMMA = 0.5


def collector_with_replay(env: PointMassEnv, n_step: int) -> tuple[Collector, ReplayBuffer]:
    torch.manual_seed(0)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    replay = ReplayBuffer(spec.num_envs, 16, spec.observation_spec, spec.action_dim, n_step, GAMMA, spec.device)
    return Collector(env, spec, agent, replay, SampledPhaseTimer(spec.device, sample_every=10**6)), replay


def test_the_step_after_a_quarantined_row_starts_from_no_real_observation_and_is_never_sampled():
    # Row 2's observation and reward are NaN on env steps 3 and 6 (replay slots 2 and 5); the
    # collector zeroes that observation, so slots 3 (and 6) start from zeros the env never showed.
    env = PointMassEnv(num_envs=4, max_episode_length=50, nan_rows=(2,), nan_every=3)
    collector, replay = collector_with_replay(env, n_step=1)
    for _ in range(7):
        collector.step()
    assert torch.equal(replay.obs["policy"][3, 2], torch.zeros(3)), "the planted zeroed observation"
    assert replay.valid[:7, 2].tolist() == [True, True, False, False, True, False, False]
    assert replay.valid[:7, [0, 1, 3]].all()
    batch = replay.sample(4096)
    assert (batch.obs["policy"].abs().sum(-1) > 0).all(), "a transition from a zeroed observation was sampled"


def test_env_only_steps_end_the_n_step_window_of_the_step_stored_before_them():
    env = PointMassEnv(num_envs=2, max_episode_length=50)
    collector, replay = collector_with_replay(env, n_step=3)
    collector.step()
    collector.step_env_only([torch.zeros(2, 1)] * 3)
    collector.step()
    collector.step()
    torch.manual_seed(1)
    batch = replay.sample(512)
    first = batch.obs["policy"][:, 0] == replay.obs["policy"][0, 0, 0]
    assert first.any(), "the first stored step was not sampled"
    row = first.nonzero()[0, 0]
    # Step 0's window is step 0 alone: the next stored step starts where the env-only steps left.
    assert batch.reward[row].item() == pytest.approx(replay.reward[0, 0].item())
    assert batch.discount[row].item() == pytest.approx(GAMMA)
    assert torch.equal(batch.next_obs["policy"][row], replay.next_obs["policy"][0, 0])
