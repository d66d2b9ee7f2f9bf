"""A task's semantic fingerprint: its resolved configuration as plain, stable data and its hash.

The record names every term by the function or class it runs and every parameter by value,
so two configs with the same record define the same MDP (up to the terms' code). The hash is
what exported policies and the recorded task contracts (``contracts/tasks``) carry.
"""

from __future__ import annotations

import enum
import hashlib
import json
from pathlib import Path
from typing import Any


def stable_config(value: Any) -> Any:
    """``value`` as plain JSON data that is the same in every process: mappings with sorted
    keys, tuples as lists, callables and classes by ``module:qualname``."""
    if isinstance(value, dict):
        return {str(k): stable_config(v) for k, v in sorted(value.items(), key=lambda item: str(item[0]))}
    if isinstance(value, list | tuple):
        return [stable_config(v) for v in value]
    if isinstance(value, enum.Enum):
        return stable_config(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Path):
        return str(value)
    if callable(value):
        return f"{getattr(value, '__module__', '?')}:{getattr(value, '__qualname__', type(value).__qualname__)}"
    return f"{type(value).__module__}:{type(value).__qualname__}"  # never a repr: it may hold an address


# Config sections added after tasks' records were first written, with the value that means "not
# used". A task that leaves one unused keeps the record (and fingerprint) it had before the
# section existed: an exported policy of it still matches its task.
LATER_SECTIONS = {"terrain": None, "height_scans": {}}


def task_record(task: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The task's resolved config (``unilab.task_config``) as stable data, less the settings
    of how the env runs (``EXECUTION_SETTINGS``: checks, profiling, CUDA graphs), which leave
    the MDP as it is, and less the ``LATER_SECTIONS`` it leaves unused."""
    from unilab.config import EXECUTION_SETTINGS
    from unilab.registry import task_config

    config = task_config(task, dict(overrides or {})).model_dump(exclude=set(EXECUTION_SETTINGS))
    config = {k: v for k, v in config.items() if not (k in LATER_SECTIONS and v == LATER_SECTIONS[k])}
    return {"task": task, "config": stable_config(config)}


def record_fingerprint(record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def task_fingerprint(task: str, overrides: dict[str, Any] | None = None) -> str:
    return record_fingerprint(task_record(task, overrides))
