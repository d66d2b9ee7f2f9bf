"""The env a trained policy acts on, rebuilt from what its run recorded.

A checkpoint, a run record (``run.json``) and an exported policy's metadata each record the
run's ``task``, ``backend`` and ``env_overrides``. Play, evaluation and export rebuild that env
on a backend, device and env count of their own choosing, so they take what the run's env
computed, not how it ran: the overrides without their execution settings
(``unilab.config.task_overrides``: a CPU export of a policy trained with ``cuda_graph=true``
could not graph).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from unilab_rl.contract import EnvFactory, RunnerEnv


def recorded_env_overrides(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """What the recorded run's env computed: its env overrides without execution settings."""
    from unilab.config import task_overrides

    return task_overrides(recorded["env_overrides"])


def build_trained_env(factory: EnvFactory, recorded: Mapping[str, Any], *, num_envs: int, seed: int,
                      backend: str | None = None, device: str | None = None) -> RunnerEnv:
    """The recorded run's task with what its env computed, on ``backend`` (default: the one it
    trained on); see ``build_env`` for the errors."""
    return build_env(factory, recorded["task"], recorded_env_overrides(recorded), backend=backend or recorded["backend"],
                     num_envs=num_envs, device=device, seed=seed)


def build_env(factory: EnvFactory, task: str, overrides: Mapping[str, Any], *, backend: str, num_envs: int,
              device: str | None, seed: int) -> RunnerEnv:
    """``task`` with ``overrides`` (an evaluation's: resolved from the recorded ones). A bad key or
    value is the factory's ValueError or KeyError, naming it; anything else a term or the
    backend raises while building becomes a ValueError naming what was asked for."""
    try:
        return factory(task, backend=backend, num_envs=num_envs, device=device, seed=seed, overrides=dict(overrides))
    except (TypeError, ArithmeticError, IndexError, RuntimeError, MemoryError) as error:
        raise ValueError(f"the env could not be built (--backend {backend} --num-envs {num_envs}, task {task} "
                         f"with its env overrides): {type(error).__name__}: {error}") from None
