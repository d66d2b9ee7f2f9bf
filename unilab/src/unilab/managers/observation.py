"""Observation manager: groups of terms -> flat (N, dim) float32 tensors.

A term several groups repeat (same function, same params, no state) is computed once per
pass and its output reused; each group still applies its own noise, clip and scale.

Per-term noise, clip and scale are folded into per-column vectors of the group, so a
group costs one concatenation plus at most three whole-group ops whatever its term
count; a group without noise/clip/scale pays none of them. A group whose terms are the first
terms of another group (a policy group opening its critic group) takes the head of that
group's concatenation instead of one of its own. Noise is drawn from the env
RNG. History stacks the last ``history_length`` frames (oldest first); a reset row's
history is refilled with its first post-reset frame.
"""

from __future__ import annotations

import torch

from unilab.config import ObsGroupCfg
from unilab.managers.base import build_term, reset_terms
from unilab.mirror import Mirror, build_mirror, combine, declared_by_all


class _Group:
    def __init__(self, name: str, cfg: ObsGroupCfg, env) -> None:
        self.name = name
        self.terms = [build_term(f"observations.{name}", t, tc, env) for t, tc in cfg.terms.items()]
        outs = [t.fn(env) for t in self.terms]
        # (N,) terms become (N, 1) columns; decided once here, not per step.
        self._fns = [(lambda e, f=t.fn: f(e).unsqueeze(1)) if o.dim() == 1 else t.fn for t, o in zip(self.terms, outs)]
        self.term_dims = {t.name: (1 if o.dim() == 1 else o.shape[1]) for t, o in zip(self.terms, outs)}
        for t in self.terms:  # a fused term names the parts of its output
            if t.components is not None and sum(t.components.values()) != self.term_dims[t.name]:
                raise ValueError(f"observations.{name} term {t.name!r}: components {t.components} add up to "
                                 f"{sum(t.components.values())} columns, the term returns {self.term_dims[t.name]}")
        # Terms that are the same function with the same params in several groups (the critic
        # usually repeats the policy's terms) are computed once per pass; a term with state
        # (``reset``) is always its own.
        self.keys = [None if t.reset is not None else (t.cfg.func, repr(t.cfg.params)) for t in self.terms]
        self.frame_dim = sum(self.term_dims.values())
        self.history = cfg.history_length
        self.dim = self.frame_dim * self.history
        self.mirror = self._mirror(env)
        dev, inf = env.device, float("inf")
        lo, hi, clo, chi, scale = [], [], [], [], []
        for t, d in zip(self.terms, self.term_dims.values()):
            noise = t.cfg.noise if (cfg.enable_corruption and t.cfg.noise) else (0.0, 0.0)
            clip = t.cfg.clip or (-inf, inf)
            lo += [noise[0]] * d; hi += [noise[1]] * d
            clo += [clip[0]] * d; chi += [clip[1]] * d
            scale += [1.0 if t.cfg.scale is None else t.cfg.scale] * d
        as_t = lambda v: torch.tensor(v, dtype=torch.float32, device=dev)
        self.noise_lo, self.noise_width = as_t(lo), as_t(hi) - as_t(lo)
        self.has_noise = bool((self.noise_width != 0).any())
        self.clip_lo, self.clip_hi = as_t(clo), as_t(chi)
        self.has_clip = any(t.cfg.clip for t in self.terms)
        self.scale = as_t(scale)
        self.has_scale = any(t.cfg.scale is not None for t in self.terms)
        if self.history > 1:
            self.buffer = torch.zeros(env.num_envs, self.history, self.frame_dim, device=dev)
            self.fresh = torch.ones(env.num_envs, dtype=torch.bool, device=dev)

    def _mirror(self, env) -> Mirror | None:
        """The group's left-right reflection when its terms declare one; all or none must."""
        if not declared_by_all({t.name: t.cfg.mirror for t in self.terms}, f"observations.{self.name}: terms"):
            return None
        parts = [build_mirror(t.cfg.mirror, env, self.term_dims[t.name], f"observations.{self.name}.{t.name}.mirror")
                 for t in self.terms]
        return combine(parts, self.history, env.device, f"observations.{self.name}")

    def raw(self, env, shared: dict) -> torch.Tensor:
        """This state's frame before noise, clip and scale: a tensor of its own (cat or clone)."""
        outs = []
        for fn, key in zip(self._fns, self.keys):
            if key is not None and key in shared:
                outs.append(shared[key])
                continue
            out = fn(env)
            if key is not None:
                shared[key] = out
            outs.append(out)
        return torch.cat(outs, dim=1) if len(outs) > 1 else outs[0].clone()

    def finish(self, env, x: torch.Tensor, owned: bool, commit: bool) -> torch.Tensor:
        """Noise, clip, scale and history on a raw frame. ``owned``: ``x`` is this group's own
        tensor, changed in place (noise in 3 kernels, not 4); otherwise (a view of another
        group's frame) the result is a new tensor and ``x`` is left as it is."""
        if self.has_noise:
            noise = torch.rand(x.shape, generator=env.rng, device=x.device)
            x = x.add_(self.noise_lo) if owned else torch.add(x, self.noise_lo)
            x.addcmul_(self.noise_width, noise)
            owned = True
        if self.has_clip:
            x, owned = torch.clamp(x, self.clip_lo, self.clip_hi), True
        if self.has_scale:
            x, owned = x * self.scale, True
        if not owned:
            x = x.clone()
        if self.history == 1:
            return x
        # A fresh (just reset) row repeats its first frame over the whole history.
        shifted = torch.cat((self.buffer[:, 1:], x.unsqueeze(1)), dim=1)
        stacked = torch.where(self.fresh[:, None, None], x.unsqueeze(1).expand_as(shifted), shifted)
        self.last_stacked = stacked
        if commit:
            self.commit_last()
        return stacked.reshape(x.shape[0], self.dim)

    def starts(self, other: _Group) -> bool:
        """Whether this group's terms are the first terms of ``other`` (same functions and
        params, none with state): its raw frame is then the head of ``other``'s."""
        n = len(self.keys)
        return (other is not self and len(other.keys) > n and None not in self.keys
                and other.keys[:n] == self.keys)

    def commit_last(self) -> None:
        if self.history > 1:
            self.buffer.copy_(self.last_stacked)
            self.fresh.zero_()

    def reset(self, done: torch.Tensor) -> None:
        if self.history > 1:
            self.fresh |= done
        reset_terms(self.terms, done)


class ObservationManager:
    def __init__(self, cfg: dict[str, ObsGroupCfg], env) -> None:
        self.groups = [_Group(name, g, env) for name, g in cfg.items()]
        self.spec = {g.name: g.dim for g in self.groups}
        # A group whose terms open another group (the policy's usually open the critic's) reads
        # its raw frame as the head of that group's: one concatenation fewer per pass.
        # Sources are groups that open no other group, so no source is itself read from another.
        self.head_of: dict[str, _Group] = {}
        for g in self.groups:
            source = next((h for h in self.groups if g.starts(h) and not any(h.starts(k) for k in self.groups)), None)
            if source is not None:
                self.head_of[g.name] = source
        sources = {h.name for h in self.head_of.values()}
        # A source's frame changes in place only once the groups read from it are done (in order).
        self._owned = {g.name: g.name not in sources
                       or all(self._index(d) < self._index(g.name) for d, h in self.head_of.items() if h is g)
                       for g in self.groups}

    def _index(self, name: str) -> int:
        return next(i for i, g in enumerate(self.groups) if g.name == name)

    def compute(self, env, commit: bool = True) -> dict[str, torch.Tensor]:
        """All groups for the current state; ``commit=False`` (final observations of rows
        about to reset) leaves the history buffers as they were."""
        shared: dict = {}  # outputs of terms several groups repeat, for this state only
        raws = {g.name: g.raw(env, shared) for g in self.groups if g.name not in self.head_of}
        out = {}
        for g in self.groups:
            source = self.head_of.get(g.name)
            if source is None:
                out[g.name] = g.finish(env, raws[g.name], self._owned[g.name], commit)
            else:
                out[g.name] = g.finish(env, raws[source.name][:, :g.frame_dim], False, commit)
        return out

    def reset(self, done: torch.Tensor) -> None:
        for g in self.groups:
            g.reset(done)

    def mirrors(self) -> dict[str, Mirror | None]:
        return {g.name: g.mirror for g in self.groups}

    def describe(self) -> dict[str, dict[str, int]]:
        """Group -> column widths in order, per term (a fused term per component, as
        ``term/component``)."""
        out = {}
        for g in self.groups:
            out[g.name] = {}
            for t in g.terms:
                parts = {f"{t.name}/{c}": w for c, w in t.components.items()} if t.components else \
                    {t.name: g.term_dims[t.name]}
                out[g.name].update(parts)
        return out
