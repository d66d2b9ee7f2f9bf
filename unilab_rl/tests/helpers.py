"""Tiny configurations so learner tests run in a second or two on CPU."""

from __future__ import annotations

import torch
from fake_env import PointMassEnv
from unilab_rl.algorithms import build_agent, build_config
from unilab_rl.contract import EnvSpec

TINY = {
    "flashsac": {"actor_width": 16, "critic_width": 16, "actor_blocks": 1, "critic_blocks": 1, "critic_bins": 21,
                 "batch_size": 32, "learning_starts": 64, "updates_per_step": 1.0, "replay_capacity_per_env": 64},
    "fastsac": {"actor_width": 32, "critic_width": 32, "atoms": 21, "batch_size": 32, "learning_starts": 64,
                "updates_per_step": 1.0, "replay_capacity_per_env": 64, "policy_period": 2},
}


def tiny_agent(algo: str, env: PointMassEnv | None = None, **overrides):
    env = env or PointMassEnv(num_envs=8)
    config = build_config(algo, {**TINY[algo], **overrides})
    return env, config, build_agent(algo, EnvSpec.from_env(env), config, torch.device("cpu"))
