"""Running statistics kept on device: observation normalizer and return-based reward scaler.

Both are nn.Modules with buffers so they travel in state_dict (checkpoints) and .to(device).
"""

from __future__ import annotations

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Per-feature running mean/variance (parallel-variance merge of batch moments)."""

    def __init__(self, dim: int, epsilon: float = 1e-4, clip: float = 10.0) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.tensor(epsilon))
        self.clip = clip

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        # The merge (Chan et al.) with the batch's weight w = n / (count + n):
        #   mean += w * delta,  var = (1 - w) * var + w * (batch_var + (1 - w) * delta^2),
        # written as fused ops (lerp, addcmul): the collector runs this every env step, and on a
        # GPU each op is a kernel launch.
        x = x.reshape(-1, self.mean.shape[-1]).float()
        batch_var, batch_mean = torch.var_mean(x, dim=0, unbiased=False)
        total = self.count + x.shape[0]
        w = x.shape[0] / total
        delta = batch_mean - self.mean
        self.mean.addcmul_(delta, w)
        self.var.lerp_(torch.addcmul(batch_var, delta.square(), 1.0 - w), w)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) * torch.rsqrt(self.var + 1e-8)).clamp(-self.clip, self.clip)


class ReturnScaler(nn.Module):
    """FlashSAC reward scaling: divide rewards by the running std of the discounted return.

    Tracks ``G = gamma * G * (1 - done) + r`` per env; the scale is
    ``max(sqrt(var(G)), max|G| / G_max)`` so scaled returns stay inside the critic's support
    [-G_max, G_max] even when the variance estimate is still small.
    """

    def __init__(self, num_envs: int, gamma: float, g_max: float) -> None:
        super().__init__()
        self.gamma = gamma
        self.g_max = g_max
        self.register_buffer("running_return", torch.zeros(num_envs))
        self.register_buffer("max_abs_return", torch.zeros(()))
        self.return_stats = RunningMeanStd(1)

    @torch.no_grad()
    def update(self, reward: torch.Tensor, done: torch.Tensor) -> None:
        self.running_return.mul_(self.gamma * (~done).float()).add_(reward)
        self.max_abs_return.copy_(torch.maximum(self.max_abs_return, self.running_return.abs().max()))
        self.return_stats.update(self.running_return.unsqueeze(-1))

    def scale(self) -> torch.Tensor:
        std = torch.sqrt(self.return_stats.var[0] + 1e-8)
        return torch.maximum(std, self.max_abs_return / self.g_max).clamp_min(1e-6)


def restarted_return_state(state: dict[str, torch.Tensor], scaler: ReturnScaler) -> dict[str, torch.Tensor]:
    """A saved ReturnScaler state for ``scaler``: the statistics carry over, the per-env running
    returns restart from 0. Whoever loads it starts new episodes in every env (a resumed run's
    fresh env, play with its own env count), so a saved return would be added to theirs."""
    return {**state, "running_return": torch.zeros_like(scaler.running_return)}
