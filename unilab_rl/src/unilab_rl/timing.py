"""Phase timers for the collector and learner.

GPU work is asynchronous, so a wall clock around a phase measures only the launch unless the
device is synchronized first. Synchronizing every step would cost throughput, so timers
synchronize only on sampled steps (every ``sample_every``-th) and report the mean of those.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch


class SampledPhaseTimer:
    def __init__(self, device: torch.device, sample_every: int = 10) -> None:
        self.device = device
        self.sample_every = max(1, sample_every)
        self.tick = 0
        self.totals_ms: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    @property
    def sampling(self) -> bool:
        return self.tick % self.sample_every == 0

    def advance(self) -> None:
        self.tick += 1

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        if not self.sampling:
            yield
            return
        self._sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            self.totals_ms[name] += (time.perf_counter() - start) * 1e3
            self.counts[name] += 1

    def flush(self) -> dict[str, float]:
        """Mean milliseconds per sampled call since the last flush, keyed ``<phase>_ms``."""
        means = {f"{name}_ms": self.totals_ms[name] / self.counts[name] for name in self.totals_ms if self.counts[name]}
        self.totals_ms.clear()
        self.counts.clear()
        return means
