"""Reward manager: weighted terms, per-component episode sums.

A term returns ``(N,)`` (one component, ``weight``) or, when fused, ``(N, k)`` named by
the term's declared ``components`` (``weights`` per component). All outputs are concatenated to
one ``(N, K)`` matrix and weighted in one multiply, so per-component episode sums cost a
single in-place add per step. With ``reward_scale_by_dt`` the weights absorb step_dt.
"""

from __future__ import annotations

import torch

from unilab.config import RewardTermCfg
from unilab.managers.base import build_term, reset_terms


class RewardManager:
    def __init__(self, cfg: dict[str, RewardTermCfg], env, scale_by_dt: bool) -> None:
        self.terms = [build_term("rewards", name, tc, env) for name, tc in cfg.items()]
        self.components: list[str] = []
        weights: list[float] = []
        for term in self.terms:
            columns = term.columns("rewards")
            if term.components is None:
                if term.cfg.weights is not None:
                    raise ValueError(f"rewards term {term.name!r}: 'weights' is only for fused terms "
                                     "(a term declaring 'components'); use 'weight'")
                self.components.append(term.name)
                weights.append(term.cfg.weight)
                continue
            given = term.cfg.weights or {}
            unknown = set(given) - set(columns)
            if unknown:
                raise ValueError(f"rewards term {term.name!r}: unknown components {sorted(unknown)}; "
                                 f"valid: {columns}")
            self.components += [f"{term.name}/{c}" if c in self.components else c for c in columns]
            weights += [given.get(c, 0.0) * term.cfg.weight for c in columns]
        dt = env.step_dt if scale_by_dt else 1.0
        self.weights = torch.tensor(weights, dtype=torch.float32, device=env.device) * dt
        self.num_components = len(self.components)
        self.episode_sums = torch.zeros(env.num_envs, self.num_components, device=env.device)
        self.reward = torch.zeros(env.num_envs, device=env.device)
        # A Python 0.0 in torch.where becomes a new device tensor, a fill kernel, on every call.
        self._zero = torch.zeros((), device=env.device)
        self.last_components: torch.Tensor | None = None  # weighted (N, K) of the last step
        # Per-episode sums of each weighted component, averaged over the episodes that end.
        self.metric_slot = env.metric_manager.declare([f"reward/{c}" for c in self.components], "episode",
                                                      "rewards")

    def compute(self, env) -> torch.Tensor:
        if not self.terms:
            return self.reward
        outs = [t.fn(env) for t in self.terms]
        if len(outs) == 1:
            raw = outs[0].view(outs[0].shape[0], -1)
        else:
            raw = torch.cat([o.view(o.shape[0], -1) for o in outs], dim=1)
        weighted = raw * self.weights
        self.last_components = weighted
        self.episode_sums += weighted
        return weighted.sum(dim=1)

    def reset(self, done: torch.Tensor, metrics=None) -> None:
        """Zero the episode sums of the ``done`` (N,) bool rows, after adding their
        per-component totals to ``metrics`` (when logging). Masked: no host sync."""
        mask = done.unsqueeze(1)
        if metrics is not None:
            # Selected with where, not multiplied by the mask: a running row whose sum is NaN or
            # inf (a diverged world) would give 0 * nan = nan and spoil the totals of the episodes
            # that did end. One kernel either way, against the preallocated zero.
            metrics.add(self.metric_slot, torch.where(mask, self.episode_sums, self._zero).sum(dim=0))
        self.episode_sums.masked_fill_(mask, 0.0)
        reset_terms(self.terms, done)
