"""Metric manager: telemetry accumulated on device, flushed with one host sync.

Accumulators are slots of one device vector, so ``flush`` is a single ``tolist()``.
Built-in slots: completed episodes, their return, length and per-component reward
sums, termination counts per term, velocity tracking error per step. User metric terms
(``func(env) -> (N,)``) are averaged over envs and steps between flushes.
"""

from __future__ import annotations

import time

import torch

from unilab.config import MetricTermCfg
from unilab.managers.base import build_term


class MetricManager:
    def __init__(self, cfg: dict[str, MetricTermCfg], env, reward_names: list[str],
                 termination_names: list[str]) -> None:
        self.terms = [build_term("metrics", n, tc, env) for n, tc in cfg.items()]
        self.reward_names, self.termination_names = reward_names, termination_names
        k, t, m = len(reward_names), len(termination_names), len(self.terms)
        # Layout: [episodes, return, length, steps, vel_err_xy, vel_err_yaw, rewards(k), terms(t), metrics(m)]
        self._r0 = 6
        self._t0 = self._r0 + k
        self._m0 = self._t0 + t
        self.acc = torch.zeros(self._m0 + m, device=env.device)

    def on_reset(self, done: torch.Tensor, totals: torch.Tensor, lengths: torch.Tensor,
                 fired: torch.Tensor | None) -> None:
        """Account the episodes of the ``done`` (N,) rows: per-component reward totals (K,),
        episode lengths (N,) and termination flags (N, T) of all rows (masked here)."""
        acc = self.acc
        acc[0] += done.sum()
        acc[1] += totals.sum()
        acc[2] += (lengths * done).sum()
        acc[self._r0:self._t0] += totals
        if fired is not None:
            acc[self._t0:self._m0] += (fired & done.unsqueeze(1)).sum(dim=0)

    def on_step(self, env, vel_err: torch.Tensor | None) -> None:
        self.acc[3] += 1.0
        if vel_err is not None:
            self.acc[4:6] += vel_err
        if self.terms:
            self.acc[self._m0:] += torch.stack([t.fn(env).float().mean() for t in self.terms])

    def flush(self) -> dict[str, float]:
        values = self.acc.tolist()  # the one host sync
        self.acc.zero_()
        episodes, steps = values[0], max(values[3], 1.0)
        per_ep = 1.0 / max(episodes, 1.0)
        out = {"episodes": episodes, "episode_return": values[1] * per_ep, "episode_length": values[2] * per_ep,
               "vel_error_xy": values[4] / steps, "vel_error_yaw": values[5] / steps}
        for i, name in enumerate(self.reward_names):
            out[f"reward/{name}"] = values[self._r0 + i] * per_ep
        for i, name in enumerate(self.termination_names):
            out[f"termination/{name}"] = values[self._t0 + i]
        for i, t in enumerate(self.terms):
            out[f"metric/{t.name}"] = values[self._m0 + i] / steps
        return out


class PhaseTimer:
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
