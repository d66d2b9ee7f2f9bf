"""Termination manager: terminal terms vs time-out (truncation) terms."""

from __future__ import annotations

import torch

from unilab.config import TerminationTermCfg
from unilab.managers.base import build_term


class TerminationManager:
    """``terminated`` = any terminal term fired; ``truncated`` = a time-out term fired and
    no terminal term did (a fall on the last step is a fall, not a time-out)."""

    def __init__(self, cfg: dict[str, TerminationTermCfg], env) -> None:
        self.terms = [build_term("terminations", n, tc, env) for n, tc in cfg.items()]
        self.names = [t.name for t in self.terms]
        self.time_out = torch.tensor([t.cfg.time_out for t in self.terms], dtype=torch.bool, device=env.device)
        n = env.num_envs
        self.terminated = torch.zeros(n, dtype=torch.bool, device=env.device)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=env.device)
        self.fired = torch.zeros(n, len(self.terms), dtype=torch.bool, device=env.device)

    def compute(self, env) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.terms:
            return self.terminated, self.truncated
        self.fired = torch.stack([t.fn(env) for t in self.terms], dim=1)
        self.terminated = (self.fired & ~self.time_out).any(dim=1)
        self.truncated = (self.fired & self.time_out).any(dim=1) & ~self.terminated
        return self.terminated, self.truncated

    def reset(self, done: torch.Tensor) -> None:
        for t in self.terms:
            if t.reset is not None:
                t.reset(done)
