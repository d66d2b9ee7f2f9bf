"""Per-phase wall times of the env step, recorded only when profiling is on."""

from __future__ import annotations

import time

import torch


class StepPhaseTimer:
    """Per-phase wall times, only when profiling is on. On CUDA it records events and
    reads them at flush (no sync in the step); on CPU it reads perf_counter."""

    def __init__(self, device: torch.device, enabled: bool) -> None:
        self.enabled = enabled
        self.cuda = device.type == "cuda"
        self.totals: dict[str, float] = {}
        self.pending: list[tuple[str, object, object]] = []
        self.steps = 0
        self._open: dict[str, object] = {}

    def _mark(self):
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            return ev
        return time.perf_counter()

    def start(self, name: str) -> None:
        if self.enabled:
            self._open[name] = self._mark()

    def stop(self, name: str) -> None:
        if self.enabled:
            begin, end = self._open.pop(name), self._mark()
            if self.cuda:
                self.pending.append((name, begin, end))
            else:
                self.totals[name] = self.totals.get(name, 0.0) + (end - begin) * 1e3

    def tick(self) -> None:
        if self.enabled:
            self.steps += 1

    def flush(self) -> dict[str, float]:
        if not self.enabled:
            self.steps = 0
            return {}
        if self.pending:
            torch.cuda.synchronize()
            for name, b, e in self.pending:
                self.totals[name] = self.totals.get(name, 0.0) + b.elapsed_time(e)
            self.pending.clear()
        steps = max(self.steps, 1)
        out = {f"time/{k}": v / steps for k, v in self.totals.items()}
        self.totals.clear()
        self.steps = 0
        return out
