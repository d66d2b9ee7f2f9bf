"""Termination manager: terminal terms vs time-out (truncation) terms."""

from __future__ import annotations

import torch

from unilab.config import TerminationTermCfg
from unilab.managers.base import any_column, build_term, reset_terms
from unilab.robot import index_or_slice


class TerminationManager:
    """``terminated`` = any terminal condition fired; ``truncated`` = a time-out condition
    fired and no terminal one did (a fall on the last step is a fall, not a time-out).

    A term returns ``(N,)`` bool, or, when fused, ``(N, k)`` bool named by its declared
    ``components`` (its config's ``time_out_components`` are the time-outs). Every
    condition is logged by name: ``termination/<name>`` counts the episodes it ended."""

    def __init__(self, cfg: dict[str, TerminationTermCfg], env) -> None:
        self.terms = [build_term("terminations", n, tc, env) for n, tc in cfg.items()]
        self.names: list[str] = []
        time_out: list[bool] = []
        for t in self.terms:
            columns = t.columns("terminations")
            unknown = set(t.cfg.time_out_components) - set(columns if t.components else ())
            if unknown:
                raise ValueError(f"terminations term {t.name!r}: time_out_components {sorted(unknown)} are not "
                                 f"components of the term (components: {columns if t.components else None})")
            self.names += columns
            time_out += [t.cfg.time_out or c in t.cfg.time_out_components for c in columns]
        self.time_out = torch.tensor(time_out, dtype=torch.bool, device=env.device)
        self._terminal_cols = _columns([i for i, t in enumerate(time_out) if not t], env.device)
        self._time_out_cols = _columns([i for i, t in enumerate(time_out) if t], env.device)
        n = env.num_envs
        self.terminated = torch.zeros(n, dtype=torch.bool, device=env.device)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=env.device)
        self.fired = torch.zeros(n, len(self.names), dtype=torch.bool, device=env.device)
        self.metric_slot = env.metric_manager.declare([f"termination/{c}" for c in self.names], "total",
                                                      "terminations") if self.names else None

    def compute(self, env) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.terms:
            return self.terminated, self.truncated
        outs = [t.fn(env) for t in self.terms]
        self.fired = torch.cat([o.view(o.shape[0], -1) for o in outs], dim=1) if len(outs) > 1 \
            else outs[0].view(outs[0].shape[0], -1)
        self.terminated, self.truncated = split_fired(self.fired, self._terminal_cols, self._time_out_cols)
        return self.terminated, self.truncated

    def forget_fired(self) -> None:
        """No condition fired, for a reset outside a step. Fresh tensors: those a step
        returned (``terminated``, ``truncated``) stay as the caller got them."""
        self.terminated = torch.zeros_like(self.terminated)
        self.truncated = torch.zeros_like(self.truncated)
        self.fired = torch.zeros_like(self.fired)

    def reset(self, done: torch.Tensor, metrics=None) -> None:
        """``metrics``: count the terms that ended an episode at this step's ``compute``, whose
        done rows these are (a row is done exactly when one of its terms fired). A time-out that
        fired on a row a terminal condition ended is not counted: that episode was a fall."""
        if metrics is not None and self.metric_slot is not None:
            # For bools a > b is a and not b: a column that fired, unless it is a time-out on a
            # row a terminal condition ended. Two kernels, where a & ~b takes three.
            ended_by = torch.gt(self.fired, self.terminated.unsqueeze(1) & self.time_out)
            metrics.add(self.metric_slot, ended_by.sum(dim=0))
        reset_terms(self.terms, done)


def _columns(cols: list[int], device: torch.device) -> slice | torch.Tensor | None:
    """Columns of the fired matrix as a slice where they are contiguous (a view, no kernel),
    else as an index tensor; None where there are none."""
    if not cols:
        return None
    cols = index_or_slice(cols)
    return cols if isinstance(cols, slice) else torch.tensor(cols, dtype=torch.int64, device=device)


def split_fired(fired: torch.Tensor, terminal_cols: slice | torch.Tensor | None,
                time_out_cols: slice | torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(terminated, truncated) of a fired (N, K) bool matrix: a row is terminated when a terminal
    column fired, truncated when only time-out columns did (a fall on a time-out step is a fall)."""
    terminated = _any_of(fired, terminal_cols)
    # For bools, a > b is a and not b: a time-out fired and no terminal condition did. The
    # time-outs are only read here, so a single column may stay a view of ``fired``.
    return terminated, torch.gt(_any_of(fired, time_out_cols, view_ok=True), terminated)


def _any_of(fired: torch.Tensor, cols: slice | torch.Tensor | None, view_ok: bool = False) -> torch.Tensor:
    if cols is None:
        return torch.zeros(fired.shape[0], dtype=torch.bool, device=fired.device)
    part = fired[:, cols] if isinstance(cols, slice) else fired.index_select(1, cols)
    # Without view_ok a new contiguous mask: what a step returns is no view of ``fired``.
    return any_column(part) if view_ok else part.any(dim=1)

