"""Event manager: startup, reset and interval events, and the state transaction.

Every event term has one signature, ``term(env, txn)``; what differs by mode reaches it
through the ``StateTransaction``: ``txn.rows`` is the (N,) mask of the rows the event
applies to (startup: all rows; reset: rows starting an episode; interval: rows where this
event's timer fired).

Events do not talk to the backend's state themselves: they write into the step's one
transaction, which the env commits with a single ``backend.set_state_where``. The
transaction is full-size and masked: ``reset_qpos/reset_qvel`` hold a fresh episode start
for EVERY row (reset events write all rows unconditionally, which needs no row list and
so no host sync), ``qvel`` holds the current velocities that interval events (pushes) edit
where they fired; at commit the env writes only the rows that reset or were pushed.
Interval timers are per env and masked as well. Model-field events (friction, mass) run at
startup or reset: they draw values for every row and keep the current ones outside
``txn.rows`` (``torch.where``, again no row list); their fields are checked against the
backend's declaration when the term is built. The startup transaction is not committed
(construction's first reset follows it); only model-field writes act at startup.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from unilab.config import EventTermCfg
from unilab.managers.base import any_column, build_term


@dataclass
class StateTransaction:
    """reset (N,) bool: rows starting an episode; interval (N,) bool: other rows an
    interval event hit; rows (N,) bool: the rows the event being applied acts on.
    reset_qpos/reset_qvel (N, nq/nv): episode starts (used for reset rows); qvel (N, nv):
    current velocities plus interval edits (used for interval rows)."""

    reset: torch.Tensor
    interval: torch.Tensor
    reset_qpos: torch.Tensor
    reset_qvel: torch.Tensor
    qvel: torch.Tensor
    rows: torch.Tensor | None = None


class EventManager:
    def __init__(self, cfg: dict[str, EventTermCfg], env) -> None:
        terms = {m: [] for m in ("startup", "reset", "interval")}
        for name, tc in cfg.items():
            terms[tc.mode].append(build_term(f"events[{tc.mode}]", name, tc, env))
        self.startup_terms, self.reset_terms, self.interval_terms = terms["startup"], terms["reset"], terms["interval"]
        for t in self.interval_terms:
            if getattr(t.obj, "writes_model_field", False):
                raise ValueError(f"events[interval] term {t.name!r}: model-field events run at startup or reset")
        # A reset term that writes every column of every row's episode start (``fills_reset_state``)
        # makes the env's refill of the transaction's state with the default pose, each step, moot.
        self.fills_reset_state = any(getattr(t.obj, "fills_reset_state", False) for t in self.reset_terms)
        n, dev = env.num_envs, env.device
        self.time_left = torch.zeros(n, len(self.interval_terms), device=dev)
        if self.interval_terms:
            r = torch.tensor([t.cfg.interval_range_s for t in self.interval_terms], dtype=torch.float32, device=dev)
            self.interval_lo, self.interval_width = r[:, 0], r[:, 1] - r[:, 0]
            self.time_left = self._periods(env, n)
        self.fired = torch.zeros(n, len(self.interval_terms), dtype=torch.bool, device=dev)

    def _periods(self, env, n: int) -> torch.Tensor:
        u = torch.rand(n, len(self.interval_terms), generator=env.rng, device=env.device)
        return torch.addcmul(self.interval_lo, self.interval_width, u)  # lo + width * u in one kernel

    def startup(self, env, txn: StateTransaction) -> None:
        txn.rows = txn.reset
        for t in self.startup_terms:
            t.fn(env, txn)

    def tick_interval(self, env, dt: float) -> torch.Tensor | None:
        """Advance interval timers; return the (N,) mask of rows where any interval event
        fires this step (None when there are no interval events)."""
        if not self.interval_terms:
            return None
        # In place: the timers are state carried from step to step, kept at fixed storage.
        self.time_left -= dt
        torch.le(self.time_left, 0.0, out=self.fired)
        torch.where(self.fired, self._periods(env, env.num_envs), self.time_left, out=self.time_left)
        return any_column(self.fired)  # read within this step only (the reset transaction)

    def apply(self, env, txn: StateTransaction) -> None:
        """Reset terms fill every row's episode start (model-field terms write the reset
        rows' fields); interval terms edit ``txn.qvel`` where they fired (``txn.rows``)."""
        txn.rows = txn.reset
        for t in self.reset_terms:
            t.fn(env, txn)
        for k, t in enumerate(self.interval_terms):
            txn.rows = self.fired[:, k]
            t.fn(env, txn)
