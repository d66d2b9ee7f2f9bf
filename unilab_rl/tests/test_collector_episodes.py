"""The collector's episode statistics: what ended by a termination vs by a time-out."""

from __future__ import annotations

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.collector import Collector
from unilab_rl.contract import EnvSpec
from unilab_rl.replay import ReplayBuffer
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


def test_episode_returns_and_lengths_are_those_of_the_ended_episodes():
    # Recomputed here from every step's rewards and done flags, env by env.
    env = PointMassEnv(num_envs=6, max_episode_length=5, limit=0.8)
    torch.manual_seed(0)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    collector = Collector(env, spec, agent, None, SampledPhaseTimer(spec.device, sample_every=10**6))
    real_step = env.step
    running_return, running_length = torch.zeros(6), torch.zeros(6)
    ended_returns, ended_lengths = [], []

    def watched_step(action):
        out = real_step(action)
        _, reward, terminated, truncated, _ = out
        running_return.add_(reward)
        running_length.add_(1)
        done = terminated | truncated
        ended_returns.extend(running_return[done].tolist())
        ended_lengths.extend(running_length[done].tolist())
        running_return[done], running_length[done] = 0.0, 0.0
        return out

    env.step = watched_step
    for _ in range(23):
        collector.step()
    stats = collector.flush()
    assert stats["collector/episodes"] == len(ended_returns) > 6
    assert abs(stats["collector/episode_return"] - sum(ended_returns) / len(ended_returns)) < 1e-5
    assert abs(stats["collector/episode_length"] - sum(ended_lengths) / len(ended_lengths)) < 1e-6
    assert collector.flush()["collector/episodes"] == 0, "a flush starts the next interval's sums from zero"


@pytest.mark.parametrize("where", ["reward", "obs", "final_obs"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_row_with_any_non_finite_value_is_quarantined_alone(where, value):
    env = PointMassEnv(num_envs=4)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    collector = Collector(env, spec, agent, None, SampledPhaseTimer(spec.device, sample_every=10**6))
    reward = torch.zeros(4)
    obs = {g: torch.ones(4, w) for g, w in spec.observation_spec.items()}
    final_obs = {g: torch.ones(4, w) for g, w in spec.observation_spec.items()}
    target = {"reward": reward, "obs": obs["critic"], "final_obs": final_obs["policy"]}[where]
    target[(2, -1) if target.ndim == 2 else 2] = value
    finite = collector._finite_rows(obs, reward, final_obs)
    assert finite.tolist() == [True, True, False, True]
    # Opposite infinities in one row sum to NaN: still caught.
    obs["policy"][0, 0], final_obs["critic"][0, 0] = float("inf"), float("-inf")
    assert collector._finite_rows(obs, reward, final_obs).tolist() == [False, True, False, True]
    assert int(collector.quarantined_rows) == 3 and int(collector.quarantined_steps) == 2


def test_env_only_steps_store_nothing_and_collection_goes_on_from_where_they_left():
    env = PointMassEnv(num_envs=4, max_episode_length=50)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    replay = ReplayBuffer(spec.num_envs, 16, spec.observation_spec, spec.action_dim, 1, 0.99, spec.device)
    collector = Collector(env, spec, agent, replay, SampledPhaseTimer(spec.device, sample_every=10**6))
    collector.step()
    collector.step_env_only([torch.zeros(4, 1)] * 3)
    assert replay.size == 1 and env.steps == 4 and collector.steps == 1  # one stored step: the first
    left_at = {g: v.clone() for g, v in env._observe().items()}
    for group, value in collector.obs.items():
        assert torch.equal(value, left_at[group])
    collector.step()
    # The next stored transition starts at the observation the env-only steps left.
    assert torch.equal(replay.obs["policy"][1], left_at["policy"])
    collector.set_act_ahead(lambda: None)
    collector.step()
    with pytest.raises(RuntimeError, match="acting ahead"):
        collector.step_env_only([torch.zeros(4, 1)])
    collector.set_act_ahead(None)
    with pytest.raises(ValueError, match="at least one action"):
        collector.step_env_only([])
