"""The manager runtime's per-episode reward metrics count only the episodes that ended."""

from __future__ import annotations

import torch
from controlled_owner import controlled_cfg, force_done
from unilab.config import RewardTermCfg
from unilab.registry import register_task

N = 4


def _diverged_row_zero(env) -> torch.Tensor:
    """A reward that is NaN on row 0 (a world that diverged and has not ended) and 0 elsewhere."""
    out = torch.zeros(env.num_envs, device=env.device)
    out[0] = float("nan")
    return out


def _one(env) -> torch.Tensor:
    return torch.ones(env.num_envs, device=env.device)


def _nan_on_a_running_row_cfg():
    cfg = controlled_cfg()
    cfg.rewards = {"diverged": RewardTermCfg(func=_diverged_row_zero), "alive": RewardTermCfg(func=_one)}
    # Only the test's forced termination ends an episode: row 0 keeps running with its NaN sum.
    cfg.terminations = {k: v for k, v in cfg.terminations.items() if k in ("forced", "time_out")}
    return cfg


def test_a_nan_episode_sum_of_a_running_row_does_not_reach_the_episodes_that_ended(make_env):
    register_task("test_review_nan_running_row", _nan_on_a_running_row_cfg)
    env = make_env(task="test_review_nan_running_row")
    zero = torch.zeros(N, env.action_dim)
    for _ in range(3):
        env.step(zero)
    force_done(env, torch.tensor([False, True, False, False]))
    _, _, terminated, truncated, _ = env.step(zero)
    assert (terminated | truncated).tolist() == [False, True, False, False]
    m = env.flush_metrics()
    assert m["episodes"] == 1.0
    # Row 1's episode: 4 steps of 0 on the diverged term, 4 steps of 1 * step_dt on alive.
    assert m["reward/diverged"] == 0.0
    assert abs(m["reward/alive"] - 4 * env.step_dt) < 1e-6
    assert torch.isnan(env.reward_manager.episode_sums[0, 0])  # row 0 still carries its own NaN
