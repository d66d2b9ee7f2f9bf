"""Categorical (C51-style) value distributions shared by FlashSAC and FastSAC critics."""

from __future__ import annotations

import torch


def project_onto_support(
    probs: torch.Tensor, target_atoms: torch.Tensor, v_min: float, v_max: float
) -> torch.Tensor:
    """Project a distribution with masses ``probs`` at ``target_atoms`` onto the fixed support.

    Both inputs are ``(B, K)``; the support is ``linspace(v_min, v_max, K)``. Atoms outside the
    support are clamped to its ends, and each mass is split linearly between the two nearest
    support points, so every output row sums to the input row's mass (1 for a distribution).
    """
    num_atoms = probs.shape[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    position = (target_atoms.clamp(v_min, v_max) - v_min) / delta
    lower = position.floor().long().clamp(0, num_atoms - 1)
    upper = (lower + 1).clamp(max=num_atoms - 1)
    upper_weight = position - lower.to(position.dtype)
    # When an atom sits exactly on the last support point, lower == upper == K-1 and
    # upper_weight == 0, so the whole mass lands on K-1 as it should.
    projected = torch.zeros_like(probs)
    projected.scatter_add_(-1, lower, probs * (1.0 - upper_weight))
    projected.scatter_add_(-1, upper, probs * upper_weight)
    return projected


def soft_target_atoms(
    support: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, entropy_bonus: torch.Tensor
) -> torch.Tensor:
    """Atoms of the soft Bellman target ``r + discount * (z - alpha * log pi(a'|s'))``.

    ``support`` is ``(K,)``; ``reward``, ``discount`` and ``entropy_bonus`` (= alpha*log pi)
    are ``(B,)``. ``discount`` is 0 for terminated windows, which collapses the target to r.
    """
    return reward[:, None] + discount[:, None] * (support[None, :] - entropy_bonus[:, None])


def pessimistic_soft_target(
    next_probs: torch.Tensor, support: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor,
    entropy_bonus: torch.Tensor, v_min: float, v_max: float,
) -> torch.Tensor:
    """The distributional soft target both SAC variants train on: of the ensemble's next-state
    distributions ``next_probs`` (E, B, K), take per sample the member with the lowest mean,
    shift it by the soft Bellman backup and project it back onto ``support`` (K,), which is
    ``linspace(v_min, v_max, K)`` (the bounds come as floats: reading them off the tensor
    would sync the device every update)."""
    pessimistic = (next_probs * support).sum(-1).argmin(0)
    chosen = next_probs.gather(0, pessimistic[None, :, None].expand(1, -1, support.shape[0]))[0]
    atoms = soft_target_atoms(support, reward, discount, entropy_bonus)
    return project_onto_support(chosen, atoms, v_min, v_max)
