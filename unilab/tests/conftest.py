"""Shared fixtures: ``make_env`` (closes what it made), defaulting to the test_controlled owner."""

from __future__ import annotations

import controlled_owner  # noqa: F401 (registers test_controlled)
import pytest

import unilab

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
