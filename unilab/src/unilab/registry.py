"""Task owners: registered config builders, and the one env factory.

A task is named by its registered name (a built-in owner, one registered in this process, or
one a pip-installed package declares in the ``unilab.tasks`` entry-point group, whose module is
imported when tasks are listed) or as ``package.module:task_name``: the module is imported (its
``register_task`` calls register its tasks) and the task looked up. The spec is kept as given, so
a run that records it finds the task again in a new process.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from unisim.factory import check_backend_name

from unilab.config import EnvCfg
from unilab.config_overrides import apply_overrides

_TASKS: dict[str, Callable[[], EnvCfg]] = {}
ENTRY_POINT_GROUP = "unilab.tasks"
_REGISTERED_BY: dict[str, list[str]] = {}  # a module imported for a task spec -> the tasks it registered
_IMPORTING: list[str] = []
_ENTRY_POINTS_LOADED = False


class TaskLookupError(ValueError):
    """A task name or ``module:task`` spec that names no task; the message names both."""
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
    if _IMPORTING:
        _REGISTERED_BY.setdefault(_IMPORTING[-1], []).append(name)


def _import_task_module(module: str) -> None:
    _IMPORTING.append(module)
    try:
        importlib.import_module(module)
    finally:
        _IMPORTING.pop()


def _load_entry_points() -> None:
    """Import each module a pip-installed package declares in the ``unilab.tasks`` group
    (``[project.entry-points."unilab.tasks"] name = "package.module"``), once; one that fails
    to import is reported on stderr and skipped, so it does not take the other tasks with it."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    import sys
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            _import_task_module(entry.value.partition(":")[0].strip())
        except Exception as error:  # noqa: BLE001 - a broken package must not hide the others
            print(f"unilab: entry point {entry.name!r} ({ENTRY_POINT_GROUP}: {entry.value}) failed to import: "
                  f"{type(error).__name__}: {error}", file=sys.stderr)


def _load_builtin() -> None:
    for module in _BUILTIN_MODULES:
        importlib.import_module(module)
    _load_entry_points()


def resolve_task(task: str) -> str:
    """The registered name ``task`` refers to: itself, or for ``package.module:task_name``
    ``task_name`` once the module is imported. Raises TaskLookupError naming the module and
    the task (module not found, an error raised while importing it, no such task in it)."""
    _load_builtin()
    if not isinstance(task, str) or not task:
        raise TaskLookupError(f"task: expected a task name or package.module:task_name, got {task!r}")
    module, sep, name = task.partition(":")
    if not sep:
        if task not in _TASKS:
            raise TaskLookupError(f"task: unknown task {task!r}; registered tasks: {sorted(_TASKS)} (a task of "
                                  "your own package: package.module:task_name)")
        return task
    module, name = module.strip(), name.strip()
    if not module or not name:
        raise TaskLookupError(f"task {task!r}: expected package.module:task_name")
    try:
        _import_task_module(module)
    except ModuleNotFoundError as error:
        if error.name is not None and (module == error.name or module.startswith(error.name + ".")):
            raise TaskLookupError(f"task {task!r}: module {module!r} not found (is its package installed, or on "
                                  f"PYTHONPATH?); task {name!r} not looked up") from None
        raise TaskLookupError(f"task {task!r}: importing module {module!r} (for task {name!r}) failed: "
                              f"{type(error).__name__}: {error}") from error
    except Exception as error:  # noqa: BLE001 - whatever the user's module raised, named with it
        raise TaskLookupError(f"task {task!r}: importing module {module!r} (for task {name!r}) failed: "
                              f"{type(error).__name__}: {error}") from error
    if name not in _TASKS:
        registered = _REGISTERED_BY.get(module, [])
        raise TaskLookupError(f"task {task!r}: module {module!r} registers no task {name!r}; it registers: "
                              f"{', '.join(registered) if registered else 'none'}")
    return name


def is_task(task: str) -> bool:
    """Whether ``task`` is a registered name; a ``module:task`` spec is resolved (its errors
    raised as TaskLookupError)."""
    if isinstance(task, str) and ":" in task:
        resolve_task(task)
        return True
    _load_builtin()
    return task in _TASKS


def list_tasks() -> list[str]:
    _load_builtin()
    return sorted(_TASKS)


def builtin_tasks() -> list[str]:
    """The tasks this package ships (not those a user or a test registered)."""
    _load_builtin()
    return sorted(name for name, build in _TASKS.items() if getattr(build, "__module__", None) in _BUILTIN_MODULES)


def task_config(task: str, overrides: Mapping[str, Any] | Iterable[str] | str | None = None) -> EnvCfg:
    name = resolve_task(task)
    cfg = _TASKS[name]()
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
