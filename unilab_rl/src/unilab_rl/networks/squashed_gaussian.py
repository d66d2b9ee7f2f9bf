"""Tanh-squashed Gaussian policy sampling shared by the SAC variants."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


def squashed_sample(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor, action_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``action = action_scale * tanh(mean + std * noise)`` and its log-probability.

    The log-probability includes the tanh Jacobian, written as
    ``2 * (log 2 - u - softplus(-2u))`` because ``log(1 - tanh(u)**2)`` loses all precision
    once |u| is large, and the constant ``log(action_scale)`` per dimension.
    """
    pre_tanh = _pre_tanh(mean, log_std, noise)
    gaussian_log_prob = -0.5 * noise.square() - log_std - _HALF_LOG_TWO_PI
    log_det_tanh = 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
    log_prob = (gaussian_log_prob - log_det_tanh).sum(-1) - mean.shape[-1] * math.log(action_scale)
    return action_scale * torch.tanh(pre_tanh), log_prob


def squashed_action(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor, action_scale: float) -> torch.Tensor:
    """``squashed_sample``'s action alone, the same values: acting needs no log-probability, and
    the collector runs this every env step, where each op is a kernel launch on a GPU."""
    return action_scale * torch.tanh(_pre_tanh(mean, log_std, noise))


def _pre_tanh(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The Gaussian draw before the squash, one expression for both functions above."""
    return mean + log_std.exp() * noise


def gaussian_entropy_for_std(action_dim: int, std: float, action_scale: float) -> float:
    """Entropy of a ``action_dim``-dimensional Gaussian with per-dimension std ``std`` before
    the squash's ``action_scale`` (its std in action units is ``std * action_scale``, hence the
    ``action_dim * log(action_scale)``): FlashSAC's target entropy from a target std."""
    return 0.5 * action_dim * math.log(2.0 * math.pi * math.e * std**2) + action_dim * math.log(action_scale)


class SquashedMeanPolicy(nn.Module):
    """The deterministic SAC policy as one module: raw observations -> ``action_scale *
    tanh(mean)``, with the observation normalization (if any) inside, so an exported graph
    is fed the env's observations as they are. The actor must be in eval mode (BatchNorm on
    its running statistics); this module is a frozen copy and does not follow training."""

    def __init__(self, actor: nn.Module, action_scale: float, normalizer: nn.Module | None = None) -> None:
        super().__init__()
        self.actor = copy.deepcopy(actor).eval().requires_grad_(False)
        self.normalizer = None if normalizer is None else copy.deepcopy(normalizer).eval()
        self.action_scale = float(action_scale)
        self.eval()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if self.normalizer is not None:
            obs = self.normalizer.normalize(obs)
        mean, _ = self.actor(obs)
        return self.action_scale * torch.tanh(mean)
