"""The benchmarks' tests reuse the product suites' small helpers (synthetic clips, the tiny
training settings and fake env factory) rather than copies of them."""

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
for helpers in (ROOT / "unilab" / "tests", ROOT / "unilab_rl" / "tests"):
    if str(helpers) not in sys.path:
        sys.path.append(str(helpers))


@pytest.fixture(autouse=True)
def _single_thread_and_seed():
    # CI has 2 cores shared with other suites; one intra-op thread avoids oversubscription.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield


@pytest.fixture
def make_env():
    """Builds envs through the one public entry point and closes them after the test."""
    import unilab

    made = []

    def make(task, backend="mujoco", num_envs=4, seed=0, overrides=None, **kw):
        made.append(unilab.make_manager_based_rl_env(task, backend=backend, num_envs=num_envs, seed=seed,
                                                     overrides=overrides, **kw))
        return made[-1]

    yield make
    for env in made:
        env.close()
