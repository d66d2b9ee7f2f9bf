"""FastTD3 / holosoma style MLPs: Linear -> LayerNorm -> SiLU, widths halving per layer."""

from __future__ import annotations

import torch
from torch import nn


def layernorm_silu_mlp(in_features: int, width: int, out_features: int, layers: int = 3) -> nn.Sequential:
    """``layers`` hidden layers of width, width/2, width/4, ... then a linear output."""
    modules: list[nn.Module] = []
    features = in_features
    for depth in range(layers):
        hidden = max(width // (2**depth), 16)
        modules += [nn.Linear(features, hidden), nn.LayerNorm(hidden), nn.SiLU()]
        features = hidden
    modules.append(nn.Linear(features, out_features))
    return nn.Sequential(*modules)


class GaussianActor(nn.Module):
    """Mean and log-std heads on one trunk; log-std squashed into [log_std_min, log_std_max]."""

    def __init__(self, obs_dim: int, action_dim: int, width: int,
                 log_std_min: float = -5.0, log_std_max: float = 0.0) -> None:
        super().__init__()
        self.net = layernorm_silu_mlp(obs_dim, width, 2 * action_dim)
        self.action_dim = action_dim
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        # Small initial means keep early actions near the default pose.
        final = self.net[-1]
        assert isinstance(final, nn.Linear)
        nn.init.uniform_(final.weight, -1e-3, 1e-3)
        nn.init.zeros_(final.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # Sampling and log-probabilities need float32; the net may run in bf16 under autocast.
        mean, raw_log_std = self.net(obs).float().split(self.action_dim, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw_log_std) + 1.0)
        return mean, log_std


class CategoricalCriticEnsemble(nn.Module):
    """E independent C51 Q-networks; returns logits (E, B, atoms)."""

    def __init__(self, obs_dim: int, action_dim: int, width: int, ensemble: int, atoms: int) -> None:
        super().__init__()
        self.members = nn.ModuleList(layernorm_silu_mlp(obs_dim + action_dim, width, atoms) for _ in range(ensemble))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([member(x) for member in self.members])
