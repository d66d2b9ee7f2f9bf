"""Event manager: startup, reset and interval events, and the state transaction.

Reset-mode events do not talk to the backend's state themselves: they write into the
step's one ``StateTransaction`` (rows gathered on device, qpos/qvel buffers), which the
env commits with a single ``backend.set_state``. State-writing interval events (pushes)
join the same transaction as extra rows after the reset rows, so a step still makes at
most one ``set_state`` call. Interval timers are per env and sync-free (masked).
Model-field events (friction, mass) go through ``set_model_field`` for their rows;
their fields are checked against the backend's declaration when the term is built.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from unilab.config import EventTermCfg
from unilab.managers.base import build_term


@dataclass
class StateTransaction:
    """Rows ``[:num_reset]`` are resetting (qpos/qvel start at the reset keyframe);
    rows ``[num_reset:]`` are interval rows (qpos/qvel start at their current state)."""

    rows: torch.Tensor
    num_reset: int
    qpos: torch.Tensor
    qvel: torch.Tensor

    @property
    def reset_rows(self) -> torch.Tensor:
        return self.rows[:self.num_reset]

    @property
    def reset_qpos(self) -> torch.Tensor:
        return self.qpos[:self.num_reset]

    @property
    def reset_qvel(self) -> torch.Tensor:
        return self.qvel[:self.num_reset]

    @property
    def interval_rows(self) -> torch.Tensor:
        return self.rows[self.num_reset:]


class EventManager:
    def __init__(self, cfg: dict[str, EventTermCfg], env) -> None:
        terms = {m: [] for m in ("startup", "reset", "interval")}
        for name, tc in cfg.items():
            terms[tc.mode].append(build_term(f"events[{tc.mode}]", name, tc, env))
        self.startup_terms, self.reset_terms, self.interval_terms = terms["startup"], terms["reset"], terms["interval"]
        n, dev = env.num_envs, env.device
        self.time_left = torch.zeros(n, len(self.interval_terms), device=dev)
        if self.interval_terms:
            r = torch.tensor([t.cfg.interval_range_s for t in self.interval_terms], dtype=torch.float32, device=dev)
            self.interval_lo, self.interval_width = r[:, 0], r[:, 1] - r[:, 0]
            self.time_left = self._periods(env, n)
        self.fired = torch.zeros(n, len(self.interval_terms), dtype=torch.bool, device=dev)

    def _periods(self, env, n: int) -> torch.Tensor:
        u = torch.rand(n, len(self.interval_terms), generator=env.rng, device=env.device)
        return self.interval_lo + self.interval_width * u

    def startup(self, env) -> None:
        for t in self.startup_terms:
            t.fn(env, None)

    def apply_reset(self, env, txn: StateTransaction) -> None:
        for t in self.reset_terms:
            t.fn(env, txn)

    def tick_interval(self, env, dt: float) -> torch.Tensor | None:
        """Advance interval timers; return the (N,) mask of rows where any interval event
        fires this step (None when there are no interval events)."""
        if not self.interval_terms:
            return None
        self.time_left -= dt
        self.fired = self.time_left <= 0.0
        self.time_left = torch.where(self.fired, self._periods(env, env.num_envs), self.time_left)
        return self.fired.any(dim=1)

    def apply_interval(self, env, txn: StateTransaction) -> None:
        rows = txn.interval_rows
        if rows.numel() == 0:
            return
        fired = self.fired.index_select(0, rows)
        for k, t in enumerate(self.interval_terms):
            t.fn(env, txn, fired[:, k])
