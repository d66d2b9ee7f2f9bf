"""Phase timers for the collector and learner.

GPU work is asynchronous, so a wall clock around a phase measures only its launch. On CUDA a
sampled phase (every ``sample_every``-th step) therefore records a pair of CUDA events on the
stream that runs it, and ``flush`` reads the elapsed times, once the last event has completed.
Nothing synchronizes inside a step: a timed step runs as an untimed one does, and with the
learner on a stream of its own (``overlap_learning``) its updates still run beside the next
env step. A phase's figure is then the time its stream took for it on the shared GPU,
including any wait for the other stream (the collector's replay phase waits for the updates
before the agent observes), so the phases need not add up to the step. On the CPU the clock
is exact: the work is done when the call returns.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch

# Recorded event pairs held before completed ones are folded into the totals without a flush.
MAX_PENDING = 256


class SampledPhaseTimer:
    def __init__(self, device: torch.device, sample_every: int = 10) -> None:
        self.device = device
        self.sample_every = max(1, sample_every)
        self.tick = 0
        self.totals_ms: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        # (phase, start, end) CUDA events recorded since the last flush, read there.
        self.pending: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []

    @property
    def sampling(self) -> bool:
        return self.tick % self.sample_every == 0

    def advance(self) -> None:
        self.tick += 1
        if len(self.pending) > MAX_PENDING:  # a caller that seldom flushes: fold what has completed
            self._fold(wait=False)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the body when this step is sampled; on CUDA on the stream current at entry,
        which must be the one the body's work runs on."""
        if not self.sampling:
            yield
            return
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(torch.cuda.current_stream(self.device))
            try:
                yield
            finally:
                end.record(torch.cuda.current_stream(self.device))
                self.pending.append((name, start, end))
            return
        started = time.perf_counter()
        try:
            yield
        finally:
            self.totals_ms[name] += (time.perf_counter() - started) * 1e3
            self.counts[name] += 1

    def flush(self) -> dict[str, float]:
        """Mean milliseconds per sampled call since the last flush, keyed ``<phase>_ms``."""
        self._fold(wait=True)  # callers flush at log time, when the step's results are read anyway
        means = {f"{name}_ms": self.totals_ms[name] / self.counts[name] for name in self.totals_ms if self.counts[name]}
        self.totals_ms.clear()
        self.counts.clear()
        return means

    def _fold(self, wait: bool) -> None:
        """Add the recorded phases whose end event has completed (all of them, waiting, when
        ``wait``) to the totals."""
        kept = []
        for name, start, end in self.pending:
            if wait:
                end.synchronize()
            elif not end.query():
                kept.append((name, start, end))
                continue
            self.totals_ms[name] += start.elapsed_time(end)
            self.counts[name] += 1
        self.pending = kept
