"""unilab_rl: off-policy runners (FlashSAC, FastSAC), GPU replay, collector and training CLI.

Only ``unilab_rl.cli`` imports unilab; everything else depends on torch and
``unilab_rl.contract`` alone.
"""

from unilab_rl import early_signals  # noqa: F401 - first: a training command's SIGINT during start-up
from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION

__all__ = ["ENV_RUNNER_CONTRACT_VERSION"]
