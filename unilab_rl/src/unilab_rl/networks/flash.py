"""FlashSAC networks: norm-bounded inverted-residual MLPs, batched over an ensemble axis.

Every tensor inside is ``(E, B, features)``: the critic ensemble runs as one batched matmul,
and the actor is the E=1 case. What bounds the norms (the paper's stability argument):
- weights: each Linear row is projected back to unit norm after every optimizer step;
  BatchNorm (scale, bias) and RMSNorm scale are projected to norm sqrt(features);
- features: BatchNorm before each nonlinearity (large batches give good statistics, and the
  replay distribution drifts), RMSNorm after the trunk bounds each sample's feature norm;
- gradients: follow from the two above.
Call ``project_to_unit_norm(module)`` after each ``optimizer.step()``, or the call
``unit_norm_projection`` makes of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from unilab_rl.networks.mlp import zero_pad_to_gemm_multiple


def as_gemm_input(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the dtype the next matmul reads it in: bf16 under bf16 autocast, else as is.

    The matmul would round ``t`` to that dtype anyway, so the result and its gradient are the
    same bit for bit; casting here instead lets a compiled graph keep the wide hidden
    activations in 16 bits between kernels rather than write and read them in float32."""
    device = t.device.type
    if torch.is_autocast_enabled(device):
        return t.to(torch.get_autocast_dtype(device))
    return t


class UnitLinear(nn.Module):
    """Bias-free linear map per ensemble member, rows kept at unit L2 norm."""

    def __init__(self, ensemble: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(ensemble, out_features, in_features))
        for member in range(ensemble):
            nn.init.orthogonal_(self.weight.data[member])
        self.project()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Sizes zero-padded to GEMM multiples and cut back (see networks/mlp.py): the G1's
        # critic input (137), 101 bins and 29 actions would otherwise take slow bf16 kernels.
        weight = zero_pad_to_gemm_multiple(zero_pad_to_gemm_multiple(self.weight, 1), 2)
        out = torch.bmm(zero_pad_to_gemm_multiple(x, -1), weight.transpose(1, 2))
        return out[..., :self.weight.shape[1]]

    @torch.no_grad()
    def project(self) -> None:
        self.weight.copy_(F.normalize(self.weight, dim=-1, eps=1e-8))


class UnitBatchNorm(nn.Module):
    """BatchNorm over the batch axis of each ensemble member; (scale, bias) norm = sqrt(d)."""

    def __init__(self, ensemble: int, features: int, momentum: float = 0.01, eps: float = 1e-5) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(ensemble, 1, features))
        self.bias = nn.Parameter(torch.zeros(ensemble, 1, features))
        self.register_buffer("running_mean", torch.zeros(ensemble, 1, features))
        self.register_buffer("running_var", torch.ones(ensemble, 1, features))
        self.momentum = momentum
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Statistics in float32 even under bf16 autocast: a 16-bit variance of a large batch
        # loses most of its digits.
        x = x.float()
        if self.training:
            mean = x.mean(dim=1, keepdim=True)
            # Written out: torch.var over the middle axis is ~5x slower on CPU. A single
            # torch.var_mean pass is faster on the GPU but rounds differently, and the walking
            # entry trained with it fell short of the velocity sweep where this form passes.
            var = (x - mean).square().mean(dim=1, keepdim=True)
            with torch.no_grad():
                self.running_mean.lerp_(mean, self.momentum)
                self.running_var.lerp_(var, self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        return (x - mean) * torch.rsqrt(var + self.eps) * self.scale + self.bias

    @torch.no_grad()
    def project(self) -> None:
        features = self.scale.shape[-1]
        norm = torch.sqrt((self.scale.square() + self.bias.square()).sum(-1, keepdim=True) + 1e-8)
        factor = math.sqrt(features) / norm
        self.scale.mul_(factor)
        self.bias.mul_(factor)


class UnitRMSNorm(nn.Module):
    """RMSNorm with a learned scale whose norm is kept at sqrt(d)."""

    def __init__(self, ensemble: int, features: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(ensemble, 1, features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * self.scale

    @torch.no_grad()
    def project(self) -> None:
        features = self.scale.shape[-1]
        self.scale.mul_(math.sqrt(features) / torch.sqrt(self.scale.square().sum(-1, keepdim=True) + 1e-8))


class InvertedResidualBlock(nn.Module):
    """x + relu(BN(W2 relu(BN(W1 x)))) with W1 expanding the width ``expansion`` times."""

    def __init__(self, ensemble: int, width: int, expansion: int = 4) -> None:
        super().__init__()
        self.expand = UnitLinear(ensemble, width, width * expansion)
        self.expand_norm = UnitBatchNorm(ensemble, width * expansion)
        self.contract = UnitLinear(ensemble, width * expansion, width)
        self.contract_norm = UnitBatchNorm(ensemble, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # ReLU commutes with the bf16 rounding the contracting matmul applies anyway.
        h = F.relu(as_gemm_input(self.expand_norm(self.expand(x))))
        h = F.relu(self.contract_norm(self.contract(h)))
        return x + h


class FlashTrunk(nn.Module):
    """Input BatchNorm (normalizes raw observations) -> embed -> blocks -> post-RMSNorm."""

    def __init__(self, ensemble: int, in_features: int, width: int, num_blocks: int) -> None:
        super().__init__()
        self.input_norm = UnitBatchNorm(ensemble, in_features)
        self.embed = UnitLinear(ensemble, in_features, width)
        self.blocks = nn.ModuleList(InvertedResidualBlock(ensemble, width) for _ in range(num_blocks))
        self.post_norm = UnitRMSNorm(ensemble, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(self.input_norm(x))
        for block in self.blocks:
            h = block(h)
        return self.post_norm(h)


class UnitHead(nn.Module):
    """Output layer: unit-norm weight rows plus a free bias."""

    def __init__(self, ensemble: int, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = UnitLinear(ensemble, in_features, out_features)
        self.bias = nn.Parameter(torch.zeros(ensemble, 1, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.bias


class FlashActor(nn.Module):
    """Tanh-Gaussian policy; log-std squashed into [log_std_min, log_std_max]."""

    def __init__(self, obs_dim: int, action_dim: int, width: int, num_blocks: int,
                 log_std_min: float = -10.0, log_std_max: float = 2.0) -> None:
        super().__init__()
        self.trunk = FlashTrunk(1, obs_dim, width, num_blocks)
        self.mean_head = UnitHead(1, width, action_dim)
        self.log_std_head = UnitHead(1, width, action_dim)
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs.unsqueeze(0))
        # Sampling and log-probabilities need float32; the heads may run in bf16 under autocast.
        mean = self.mean_head(h)[0].float()
        squashed = torch.tanh(self.log_std_head(h)[0].float())
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (squashed + 1.0)
        return mean, log_std


class FlashCriticEnsemble(nn.Module):
    """E categorical Q-networks evaluated as one batched pass; returns logits (E, B, bins)."""

    def __init__(self, obs_dim: int, action_dim: int, width: int, num_blocks: int,
                 ensemble: int, num_bins: int) -> None:
        super().__init__()
        self.ensemble = ensemble
        self.trunk = FlashTrunk(ensemble, obs_dim + action_dim, width, num_blocks)
        self.head = UnitHead(ensemble, width, num_bins)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        # Each member normalizes its own (expanded, not copied) view of the input. One shared
        # (1, B, F) copy would compute the batch statistics once: a slightly shorter update,
        # yet no faster beside collection, and rounded differently on CUDA.
        x = torch.cat([obs, action], dim=-1).unsqueeze(0).expand(self.ensemble, -1, -1)
        return self.head(self.trunk(x))


def project_to_unit_norm(module: nn.Module) -> None:
    """Apply every norm-bounding projection inside ``module`` (call after optimizer.step)."""
    for layer in module.modules():
        if isinstance(layer, UnitLinear | UnitBatchNorm | UnitRMSNorm):
            layer.project()


def unit_norm_projection(module: nn.Module, compiled: bool) -> Callable[[], None]:
    """``project_to_unit_norm(module)`` as a call to make after each optimizer step, through
    torch.compile when ``compiled``. Why: done eagerly, the projections of the G1's critic are 81
    small kernels (per linear a norm, a clamp, a divide and a copy; about ten per normalization
    layer) and the actor's 85, run at every update, where a whole graphed update launches about
    400. Compiled on the host, the critic's became one fused kernel."""
    def project() -> None:
        project_to_unit_norm(module)

    return torch.compile(project) if compiled else project
