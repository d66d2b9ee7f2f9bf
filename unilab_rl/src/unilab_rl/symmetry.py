"""Left-right symmetry: each sampled batch plus its mirrored copy (augmentation), and an acting
policy averaged with its own mirror (evaluation).

The env's task declares how its observations and actions reflect (``env.mirrors``, contract
1.2): per group and for the action, a signed permutation of columns. A mirrored transition
is as real as the one it comes from (a reflected robot in a reflected world gets the same
reward), so adding it doubles the data a batch carries and teaches the policy both sides of
every gait it tries. It does not make the policy itself symmetric; ``mirror_averaged`` does, and
``MirrorAveragedPolicy`` does the same inside an exported policy's graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from unilab_rl.contract import POLICY_GROUP, EnvSpec, ReplayBatch


def batch_mirrors(spec: EnvSpec, enabled: bool, algo: str) -> dict[str, Any] | None:
    """The env's mirrors when the learner augments, None when it does not; asking for
    augmentation of a task that declares no mirror is an error."""
    if not enabled:
        return None
    if spec.mirrors is None:
        raise ValueError(f"{algo}: symmetry_augmentation=true needs a task that declares its left-right mirror "
                         "(env.mirrors is None for this one)")
    return spec.mirrors


def declared_mirrors(env: Any, task: str) -> dict[str, Any]:
    """``env``'s mirrors for acting mirror-averaged (``--mirror-averaged``), refused where its
    task declares none."""
    mirrors = EnvSpec.from_env(env).mirrors
    if mirrors is None:
        raise ValueError(f"--mirror-averaged: task {task!r} declares no left-right mirror (env.mirrors is None)")
    return mirrors


def reflected(x: torch.Tensor, pair: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``x``'s columns under one (index, sign) mirror."""
    index, sign = pair
    return x.index_select(-1, index) * sign.to(x.dtype)


def with_reflection(x: torch.Tensor, pair: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """The rows of ``x`` followed by their reflection."""
    return torch.cat((x, reflected(x, pair)))


def mirrored_batch(batch: ReplayBatch, mirrors: dict[str, Any]) -> ReplayBatch:
    """``batch`` followed by its mirrored copy: twice the rows, the same rewards and discounts."""
    groups = mirrors["observations"]

    def both(obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {g: with_reflection(x, groups[g]) for g, x in obs.items()}

    return ReplayBatch(obs=both(batch.obs), action=with_reflection(batch.action, mirrors["action"]),
                       reward=batch.reward.repeat(2), discount=batch.discount.repeat(2), next_obs=both(batch.next_obs))


def mirror_averaged(act: Callable[[dict[str, torch.Tensor]], torch.Tensor],
                    mirrors: dict[str, Any]) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
    """``act`` made left-right symmetric: the mean of its action and the mirror of the action it
    takes in the mirrored world. Whatever ``act`` does alike on both sides stays; what it does on
    one side only (a turn to the left whatever it is asked) cancels, so a mirrored observation
    gets exactly the mirrored action. Augmentation trains a policy on both sides; this makes the
    acting policy symmetric by construction, at two calls of ``act`` per step."""
    groups, action_pair = mirrors["observations"], mirrors["action"]

    def averaged(obs: dict[str, torch.Tensor]) -> torch.Tensor:
        action = act(obs)
        mirrored = act({group: reflected(x, groups[group]) for group, x in obs.items()})
        return 0.5 * (action + reflected(mirrored, action_pair))

    return averaged


class MirrorAveragedPolicy(nn.Module):
    """``mirror_averaged`` as one module, for export: wraps a policy from raw "policy"
    observations ``(B, obs_dim)`` to actions ``(B, action_dim)`` (``deterministic_policy()``)
    so that the exported graph itself acts symmetric, with the task's mirror inside as
    buffers. A deployment then runs what ``unilab-eval --mirror-averaged`` judged."""

    def __init__(self, policy: nn.Module, mirrors: dict[str, Any]) -> None:
        super().__init__()
        self.policy = policy
        (obs_index, obs_sign), (action_index, action_sign) = mirrors["observations"][POLICY_GROUP], mirrors["action"]
        for name, value in (("obs_index", obs_index), ("obs_sign", obs_sign), ("action_index", action_index),
                            ("action_sign", action_sign)):
            self.register_buffer(name, value.detach().clone())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        # The mirrors are read from the buffers at each call, so they follow the module's device.
        mirrors = {"observations": {POLICY_GROUP: (self.obs_index, self.obs_sign)},
                   "action": (self.action_index, self.action_sign)}
        return mirror_averaged(lambda groups: self.policy(groups[POLICY_GROUP]), mirrors)({POLICY_GROUP: obs})
