"""Symmetry augmentation: each sampled batch plus its left-right mirrored copy.

The env's task declares how its observations and actions reflect (``env.mirrors``, contract
1.2): per group and for the action, a signed permutation of columns. A mirrored transition
is as real as the one it comes from (a reflected robot in a reflected world gets the same
reward), so adding it doubles the data a batch carries and teaches the policy both sides of
every gait it tries.
"""

from __future__ import annotations

from typing import Any

import torch

from unilab_rl.contract import EnvSpec, ReplayBatch


def batch_mirrors(spec: EnvSpec, enabled: bool, algo: str) -> dict[str, Any] | None:
    """The env's mirrors when the learner augments, None when it does not; asking for
    augmentation of a task that declares no mirror is an error."""
    if not enabled:
        return None
    if spec.mirrors is None:
        raise ValueError(f"{algo}: symmetry_augmentation=true needs a task that declares its left-right mirror "
                         "(env.mirrors is None for this one)")
    return spec.mirrors


def with_reflection(x: torch.Tensor, pair: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The rows of ``x`` followed by their reflection under one (index, sign) mirror."""
    index, sign = pair
    return torch.cat((x, x.index_select(-1, index) * sign.to(x.dtype)))


def mirrored_batch(batch: ReplayBatch, mirrors: dict[str, Any]) -> ReplayBatch:
    """``batch`` followed by its mirrored copy: twice the rows, the same rewards and discounts."""
    groups = mirrors["observations"]

    def both(obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {g: with_reflection(x, groups[g]) for g, x in obs.items()}

    return ReplayBatch(obs=both(batch.obs), action=with_reflection(batch.action, mirrors["action"]),
                       reward=batch.reward.repeat(2), discount=batch.discount.repeat(2), next_obs=both(batch.next_obs))
