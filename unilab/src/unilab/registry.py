"""Task owners: registered config builders, and the one env factory."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from unisim.factory import check_backend_name

from unilab.config import EnvCfg
from unilab.config_overrides import apply_overrides

_TASKS: dict[str, Callable[[], EnvCfg]] = {}
_BUILTIN_MODULES = ("unilab.tasks.velocity.config.g1.flat", "unilab.tasks.velocity.config.g1.rough",
                    "unilab.tasks.tracking.config.g1.tracking")


def register_task(name: str, build: Callable[[], EnvCfg]) -> None:
    """Register a task owner: ``build()`` returns a fresh, validated ``EnvCfg``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty task name (str), got {name!r}")
    if not callable(build):
        raise ValueError(f"build: expected a callable returning an EnvCfg, got {type(build).__name__}")
    if name in _TASKS and _TASKS[name] is not build:
        raise ValueError(f"task {name!r} is already registered")
    _TASKS[name] = build


def _load_builtin() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


def list_tasks() -> list[str]:
    _load_builtin()
    return sorted(_TASKS)


def builtin_tasks() -> list[str]:
    """The tasks this package ships (not those a user or a test registered)."""
    _load_builtin()
    return sorted(name for name, build in _TASKS.items() if getattr(build, "__module__", None) in _BUILTIN_MODULES)


def task_config(task: str, overrides: Mapping[str, Any] | Iterable[str] | str | None = None) -> EnvCfg:
    _load_builtin()
    if task not in _TASKS:
        raise ValueError(f"task: unknown task {task!r}; registered tasks: {sorted(_TASKS)}")
    cfg = _TASKS[task]()
    if not isinstance(cfg, EnvCfg):
        raise TypeError(f"task {task!r}: builder returned {type(cfg).__name__}, expected EnvCfg")
    return apply_overrides(cfg, overrides)


def make_manager_based_rl_env(task: str, backend: str = "mujoco", num_envs: int = 1, device=None, seed: int = 0,
                              overrides: Mapping[str, Any] | Iterable[str] | str | None = None,
                              backend_options: Mapping[str, Any] | None = None):
    """Build the training env of a registered task owner on a named SimBackend.

    ``overrides``: dotted keys, as a dict or "key=value" strings, e.g.
    ``["rewards.velocity.weights.alive=2", "episode_length_s=10"]``. ``backend_options``
    (adapter-specific, e.g. ``nthread``, ``njmax``) are merged over the owner's.
    """
    from unilab.env import ManagerBasedRlEnv

    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"num_envs: expected an int >= 1, got {num_envs!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**63:
        # torch.Generator takes a 64-bit seed and wraps negative ones, so -1 and 2**64 - 1
        # would draw the same: a seed is one of 0 .. 2**63 - 1.
        raise ValueError(f"seed: expected an int in [0, 2**63), got {seed!r}")
    if backend_options is not None and not isinstance(backend_options, Mapping):
        raise ValueError(f"backend_options: expected a mapping of option names to values, got "
                         f"{type(backend_options).__name__}")
    check_backend_name(backend, argument="backend")
    cfg = task_config(task, overrides)
    if backend_options:
        cfg.backend_options = {**cfg.backend_options, **dict(backend_options)}
    return ManagerBasedRlEnv(cfg, backend=backend, num_envs=num_envs, device=device, seed=seed)
