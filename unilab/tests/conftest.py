"""Shared fixtures: a test owner whose terminations the test controls."""

from __future__ import annotations

import pytest
import torch
from unilab.config import TerminationTermCfg
from unilab.registry import register_task
from unilab.tasks.g1_walk_flat import g1_walk_flat

import unilab


def forced_done(env) -> torch.Tensor:
    """Terminal where the test sets ``env.shared['force']`` (cleared after each read)."""
    mask = env.shared.get("force")
    if mask is None:
        return torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    env.shared["force"] = None
    return mask


def _controlled() -> unilab.config.EnvCfg:
    cfg = g1_walk_flat()
    cfg.terminations["forced"] = TerminationTermCfg(func=forced_done)
    cfg.events.pop("push")
    return cfg


register_task("test_controlled", _controlled)


NUM_ENVS = 4


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running tests (genesis builds), run by make test-all")


@pytest.fixture
def make_env():
    made = []

    def make(task="test_controlled", backend="mujoco", num_envs=NUM_ENVS, seed=0, overrides=None, **kw):
        env = unilab.make_manager_based_rl_env(task, backend=backend, num_envs=num_envs, seed=seed,
                                               overrides=overrides, **kw)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()
