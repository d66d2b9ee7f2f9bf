"""The two primitives every timed sample here rests on."""

from __future__ import annotations

import statistics

import torch


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a clock read after it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def summarize(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}
