"""The test_controlled owner: g1_walk_flat without pushes, plus a termination the test
controls (``force_done``). Registered on import."""

from __future__ import annotations

import torch
from unilab.config import TerminationTermCfg
from unilab.registry import register_task
from unilab.tasks.velocity.config.g1.flat import g1_walk_flat

import unilab


class ForcedDone:
    """Terminal where the test said so (``force_done``) for the next step only."""

    def __init__(self, cfg, env) -> None:
        self.none = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        self.mask = self.none

    def __call__(self, env) -> torch.Tensor:
        mask, self.mask = self.mask, self.none
        return mask


def force_done(env, mask) -> None:
    """End the episodes of ``mask``'s rows at the next step (test_controlled owners)."""
    forced = next(t.obj for t in env.termination_manager.terms if t.name == "forced")
    forced.mask = torch.as_tensor(mask, dtype=torch.bool, device=env.device)


def controlled_cfg() -> unilab.config.EnvCfg:
    cfg = g1_walk_flat()
    cfg.terminations["forced"] = TerminationTermCfg(func=ForcedDone)
    cfg.events.pop("push")
    return cfg


register_task("test_controlled", controlled_cfg)
