"""Snapshot checkpoints' file names: the time or env-step count a snapshot was due at, written
into the name and read back (the evaluation finds a run's snapshots by name, exported ones too)."""

from __future__ import annotations


def snapshot_name(seconds: float) -> str:
    """checkpoint-90s.pt, checkpoint-2.5s.pt: the time the snapshot was due, not when it was taken."""
    return f"checkpoint-{seconds:g}s.pt"


def step_snapshot_name(env_steps: int) -> str:
    """checkpoint-25000000steps.pt: the env-step count the snapshot was due at; the checkpoint
    holds the count it was taken at (the first vectorized step at or past it)."""
    return f"checkpoint-{env_steps}steps.pt"


def _snapshot_mark(name: str, stem: str, suffix: str, unit: str) -> str | None:
    """The text between ``<stem>-`` and ``<unit><suffix>`` in a snapshot's file name, else None."""
    head, tail = f"{stem}-", f"{unit}{suffix}"
    if not (name.startswith(head) and name.endswith(tail)) or len(name) < len(head) + len(tail):
        return None
    return name[len(head):len(name) - len(tail)]


def snapshot_env_steps(name: str, stem: str = "checkpoint", suffix: str = ".pt") -> int | None:
    """The due env-step count a snapshot's file name gives (``step_snapshot_name`` read back),
    else None; an exported snapshot keeps the name with its own stem and suffix."""
    mark = _snapshot_mark(name, stem, suffix, "steps")
    return int(mark) if mark is not None and mark.isdigit() else None


def snapshot_seconds(name: str, stem: str = "checkpoint", suffix: str = ".pt") -> float | None:
    """The due time a snapshot's file name gives (``snapshot_name`` read back), else None; an
    exported snapshot keeps the name with its own stem and suffix (``policy-90s.onnx``)."""
    mark = _snapshot_mark(name, stem, suffix, "s")
    try:
        return None if mark is None else float(mark)
    except ValueError:
        return None
