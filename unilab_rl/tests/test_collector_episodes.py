"""The collector's episode statistics: what ended by a termination vs by a time-out."""

from __future__ import annotations

import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.collector import Collector
from unilab_rl.contract import EnvSpec
from unilab_rl.timing import SampledPhaseTimer


def collect(env: PointMassEnv, steps: int) -> tuple[dict[str, float], int, int]:
    """Flushed statistics after ``steps`` random-policy steps, and the terminated / ended counts seen."""
    torch.manual_seed(0)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    collector = Collector(env, spec, agent, None, SampledPhaseTimer(spec.device, sample_every=10**6))
    failures = ended = 0
    for _ in range(steps):
        terminated, truncated = collector.step()
        failures += int(terminated.sum())
        ended += int((terminated | truncated).sum())
    return collector.flush(), failures, ended


def test_the_failure_fraction_counts_terminations_among_ended_episodes():
    # A narrow limit ends some episodes by leaving it and the rest at the time limit.
    stats, failures, ended = collect(PointMassEnv(num_envs=16, max_episode_length=5, limit=0.8), 40)
    assert 0 < failures < ended, "the planted env must end episodes both ways"
    assert stats["collector/episodes"] == ended
    assert stats["collector/episode_failure_fraction"] == failures / ended


def test_time_outs_alone_are_no_failures():
    stats, failures, ended = collect(PointMassEnv(num_envs=8, max_episode_length=4, limit=1e9), 12)
    assert failures == 0 and ended == 24
    assert stats["collector/episode_failure_fraction"] == 0.0
