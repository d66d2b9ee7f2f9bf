"""Tanh-squashed Gaussian policy sampling shared by the SAC variants."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)


def squashed_sample(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor, action_scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``action = action_scale * tanh(mean + std * noise)`` and its log-probability.

    The log-probability includes the tanh Jacobian, written as
    ``2 * (log 2 - u - softplus(-2u))`` because ``log(1 - tanh(u)**2)`` loses all precision
    once |u| is large, and the constant ``log(action_scale)`` per dimension.
    """
    pre_tanh = mean + log_std.exp() * noise
    gaussian_log_prob = -0.5 * noise.square() - log_std - _HALF_LOG_TWO_PI
    log_det_tanh = 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))
    log_prob = (gaussian_log_prob - log_det_tanh).sum(-1) - mean.shape[-1] * math.log(action_scale)
    return action_scale * torch.tanh(pre_tanh), log_prob


def gaussian_entropy_for_std(action_dim: int, std: float, action_scale: float) -> float:
    """Entropy of a ``action_dim``-dimensional Gaussian with per-dimension std ``std``
    in action units (FlashSAC's target entropy from a target std)."""
    return 0.5 * action_dim * math.log(2.0 * math.pi * math.e * std**2) + action_dim * math.log(action_scale)
