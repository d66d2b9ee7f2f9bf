import importlib.util
import os
import sys
from pathlib import Path

import pytest
import torch

# The fake env lives next to the tests; make it importable without a package.
sys.path.insert(0, str(Path(__file__).parent))
# Before anything imports mujoco, which fixes its GL platform then (the repo's conftest does the
# same for a whole-repo session; this one covers running these tests alone).
os.environ.setdefault("MUJOCO_GL", "egl")

# Tests that need a real env skip where unilab is not installed (unilab_rl alone). Where it is,
# it is imported here, so that an ImportError inside unilab fails the run instead of turning
# those tests into skips.
if importlib.util.find_spec("unilab") is not None:
    import unilab  # noqa: F401


@pytest.fixture(autouse=True)
def _single_thread_and_seed():
    # CI has 2 cores shared with other suites; one intra-op thread avoids oversubscription.
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running tests (real env training), run by make test-all")
