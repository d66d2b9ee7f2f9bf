"""FastTD3 / holosoma style MLPs: Linear -> LayerNorm -> SiLU, widths halving per layer."""

from __future__ import annotations

import torch
from torch import nn

# bf16 GEMMs whose sizes are not multiples of 8 take slower tensor-core kernels. The G1's sizes
# are not (critic input 137, 101 atoms, actor output 58), so the forward passes below zero-pad
# those sizes up to the next multiple and cut the padding off again. Zero rows and columns add
# nothing to a product and get no gradient, and the stored parameters keep their sizes, so
# outputs, gradients and checkpoints are exactly those of the unpadded networks.
GEMM_MULTIPLE = 8


def zero_pad_to_gemm_multiple(t: torch.Tensor, dim: int) -> torch.Tensor:
    """``t`` with zeros appended along ``dim`` up to a multiple of GEMM_MULTIPLE."""
    pad = -t.shape[dim] % GEMM_MULTIPLE
    # Under torch.jit.trace (export) sizes are tensors: the graph then pads by the amount it
    # computes from the input, a no-op where it is 0, instead of baking in a Python branch.
    if not isinstance(pad, torch.Tensor) and not pad:
        return t
    return nn.functional.pad(t, [0, 0] * (t.ndim - 1 - dim % t.ndim) + [0, pad])


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
        *hidden, final = self.net
        for layer in hidden:
            obs = layer(obs)
        weight, bias = zero_pad_to_gemm_multiple(final.weight, 0), zero_pad_to_gemm_multiple(final.bias, 0)
        out = nn.functional.linear(obs, weight, bias)
        # Sampling and log-probabilities need float32; the net may run in bf16 under autocast.
        mean, raw_log_std = out[..., :final.out_features].float().split(self.action_dim, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(raw_log_std) + 1.0)
        return mean, log_std


class CategoricalCriticEnsemble(nn.Module):
    """E independent C51 Q-networks run as one batched chain; returns logits (E, B, atoms).

    Each layer holds the E members' weights stacked on a leading axis, so a forward pass is
    one matmul per layer for the whole ensemble instead of one per member (half the kernels
    and optimizer tensors at E=2). The members are drawn exactly as E separate
    ``layernorm_silu_mlp`` networks would be, in the same order, so a seed gives the same
    starting critic either way."""

    def __init__(self, obs_dim: int, action_dim: int, width: int, ensemble: int, atoms: int) -> None:
        super().__init__()
        members = [layernorm_silu_mlp(obs_dim + action_dim, width, atoms) for _ in range(ensemble)]
        linears = [[m for m in member if isinstance(m, nn.Linear)] for member in members]
        norms = [[m for m in member if isinstance(m, nn.LayerNorm)] for member in members]

        def stacked(layers, name: str) -> nn.ParameterList:
            return nn.ParameterList(torch.stack([getattr(member[i], name).detach() for member in layers])
                                    for i in range(len(layers[0])))

        self.weights = stacked(linears, "weight")  # each (E, out, in)
        self.biases = stacked(linears, "bias")  # each (E, out)
        self.norm_weights = stacked(norms, "weight")  # each (E, hidden)
        self.norm_biases = stacked(norms, "bias")
        self.norm_eps = norms[0][0].eps

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = zero_pad_to_gemm_multiple(torch.cat([obs, action], dim=-1), -1)
        ensemble = self.weights[0].shape[0]
        # The first layer's input is shared: one matmul against all members' rows, (B, E, out).
        first = zero_pad_to_gemm_multiple(self.weights[0], -1).flatten(0, 1)
        x = nn.functional.linear(x, first, self.biases[0].flatten())
        x = self._norm_silu(x.unflatten(-1, (ensemble, -1)), 0).transpose(0, 1)  # (E, B, out)
        last = len(self.weights) - 1
        # The bias is added after the matmul, not passed to torch.baddbmm: baddbmm first copies
        # the broadcast bias into its whole (E, B, out) output, a copy kernel per layer, where
        # torch.compile fuses a separate add into the LayerNorm that follows (at the output, into
        # the slice that drops the padded atoms), so a graphed update runs one copy kernel fewer
        # per layer.
        for i in range(1, last):
            x = torch.bmm(x, self.weights[i].transpose(1, 2)) + self.biases[i].unsqueeze(1)
            x = self._norm_silu(x, i, member_axis=0)
        atoms = self.weights[last].shape[1]
        weight = zero_pad_to_gemm_multiple(self.weights[last], 1)
        # The padded atoms are cut before the bias is added, so the bias needs no padding.
        return torch.bmm(x, weight.transpose(1, 2))[..., :atoms] + self.biases[last].unsqueeze(1)

    def _norm_silu(self, x: torch.Tensor, i: int, member_axis: int = 1) -> torch.Tensor:
        """LayerNorm with each member's own scale and shift, then SiLU; ``x`` holds the members
        on ``member_axis`` (1 for the first layer's (B, E, features), else 0)."""
        scale, shift = self.norm_weights[i], self.norm_biases[i]
        if member_axis == 0:
            scale, shift = scale.unsqueeze(1), shift.unsqueeze(1)
        x = nn.functional.layer_norm(x, x.shape[-1:], eps=self.norm_eps)
        return nn.functional.silu(torch.addcmul(shift, x, scale))
