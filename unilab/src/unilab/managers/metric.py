"""Metric manager: named telemetry accumulated on device, flushed with one host sync.

Whatever declares a metric owns its name: the reward manager declares one per reward
component, the termination manager one per termination, a command term its own (e.g.
``metrics/twist/lin_vel_error``), a metric term ``metrics/<term>``. The manager knows no
task. Each declaration takes a slot of one device vector, so ``flush`` is a single
``tolist()``, and says how its sums are reduced at flush:

- ``"step"``: a per-step value (already averaged over envs), averaged over the steps
  since the last flush;
- ``"episode"``: summed over the episodes that ended, divided by their number;
- ``"total"``: summed, not divided (e.g. how many episodes a termination ended).
"""

from __future__ import annotations

from typing import Literal

import torch

from unilab.config import MetricTermCfg
from unilab.managers.base import build_term

Reduction = Literal["step", "episode", "total"]
_EPISODES = 0  # slot of the number of episodes ended since the last flush


class MetricManager:
    def __init__(self, env) -> None:
        self.env = env
        self.names: list[str] = ["episodes"]
        self.reductions: list[Reduction] = ["total"]
        self.acc: torch.Tensor | None = None
        self.steps = 0  # host counter: counting steps needs no device op
        self.terms = []
        self._terms_slot: slice | None = None

    def declare(self, names: list[str], reduction: Reduction, owner: str) -> slice:
        """Reserve named metrics; returns the slot to ``add`` their (k,) values to."""
        if self.acc is not None:
            raise RuntimeError(f"{owner}: metrics are declared while the env is built, not after")
        if reduction not in ("step", "episode", "total"):
            raise ValueError(f"{owner}: reduction must be 'step', 'episode' or 'total', got {reduction!r}")
        taken = sorted(set(names) & set(self.names)) or sorted({n for n in names if names.count(n) > 1})
        if taken:
            raise ValueError(f"{owner}: metric names {taken} are already declared")
        start = len(self.names)
        self.names += list(names)
        self.reductions += [reduction] * len(names)
        return slice(start, len(self.names))

    def build(self, cfg: dict[str, MetricTermCfg]) -> None:
        """Build the metric terms and allocate the accumulators (after every declaration)."""
        self.terms = [build_term("metrics", n, tc, self.env) for n, tc in cfg.items()]
        if self.terms:
            self._terms_slot = self.declare([f"metrics/{t.name}" for t in self.terms], "step", "metrics")
        self.acc = torch.zeros(len(self.names), device=self.env.device)

    def add(self, slot: slice, values: torch.Tensor) -> None:
        # add_ on the slot's view: ``acc[slot] += v`` would also copy the sum back onto itself.
        self.acc[slot].add_(values)

    def episodes_ended(self, done: torch.Tensor) -> None:
        self.acc[_EPISODES].add_(done.sum())

    def episodes_ended_so_far(self) -> torch.Tensor:
        """Episodes ended since the last flush, a device scalar (reading it is the caller's sync)."""
        return self.acc[_EPISODES]

    def count_step(self) -> None:
        self.steps += 1  # on the host, apart from on_step: a replayed step graph runs no Python

    def on_step(self, env) -> None:
        if self.terms:
            self.acc[self._terms_slot].add_(torch.stack([t.fn(env).float().mean() for t in self.terms]))

    def flush(self) -> dict[str, float]:
        values = self.acc.tolist()  # the one host sync
        self.acc.zero_()
        per_step = 1.0 / max(self.steps, 1)
        per_episode = 1.0 / max(values[_EPISODES], 1.0)
        self.steps = 0
        scale = {"step": per_step, "episode": per_episode, "total": 1.0}
        return {name: v * scale[r] for name, v, r in zip(self.names, values, self.reductions)}
