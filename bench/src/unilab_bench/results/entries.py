"""A training record's entry as the presets read today.

A record names its entry as the preset and algorithm it ran plus the overrides on its command
line (``gpu_walk/fastsac rewards.velocity.params.lin_vel_z_weight=2.0``). An override whose value
the preset's entry now holds itself (a setting tried by hand, then adopted) makes no different
entry: such runs are grouped with the preset's own.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _held(preset: str, algo: str) -> dict[str, Any] | None:
    """Bare key -> value of every setting the preset's entry resolves to; None for an unknown one."""
    from unilab_rl.cli.presets import PRESETS

    entry = PRESETS[preset].entries.get(algo) if preset in PRESETS else None
    if entry is None:
        return None
    return {**entry.runner.model_dump(), **entry.algo.model_dump(), **entry.env}


def _same(text: str, value: Any) -> bool:
    if isinstance(value, bool):
        return text.strip().lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return float(text) == float(value)
        except ValueError:
            return False
    return text.strip() == str(value)


def as_presets_hold(entry: str) -> str:
    """``entry`` without the overrides its preset's entry now holds."""
    head, *overrides = entry.split(" ")
    preset, _, algo = head.partition("/")
    held = _held(preset, algo)
    if held is None:
        return entry
    kept = []
    for override in overrides:
        key, _, value = override.partition("=")
        bare = key.split(".", 1)[1] if key.split(".", 1)[0] in ("algo", "runner", "env") else key
        if bare not in held or not _same(value, held[bare]):
            kept.append(override)
    return " ".join([head, *kept])
