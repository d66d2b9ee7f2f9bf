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

TASK_HELP = ("the checkpoint's task as package.module:task_name, for a run that recorded only the name of a task "
             "its own module registers (default: as the checkpoint recorded it)")


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


def check_task(task: str, tasks: list[str]) -> None:
    """``--task``: one of ``tasks`` (the registered names), or ``package.module:task_name``, whose
    module is imported here (it registers its tasks) and the task looked up. Raises ValueError
    naming the module and the task (module not found, its import failed, no such task in it)."""
    if ":" in task:
        from unilab.registry import resolve_task

        resolve_task(task)
    elif task not in tasks:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(tasks)} (a task of your own package: "
                         "--task package.module:task_name)")


def with_task(recorded: Mapping[str, Any], task: str | None) -> Mapping[str, Any]:
    """``recorded`` (a checkpoint's document) with its task looked up as ``--task`` says: a
    ``package.module:task_name`` for a run that recorded only the name of a task its own module
    registers. The name must be the recorded one."""
    if task is None:
        return recorded
    from unilab.registry import resolve_task

    name, recorded_name = resolve_task(task), str(recorded["task"]).rpartition(":")[2]
    if name != recorded_name:
        raise ValueError(f"--task {task}: the checkpoint was trained on task {recorded['task']!r}, not {name!r}")
    return {**recorded, "task": task}
