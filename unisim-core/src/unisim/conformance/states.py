"""Helpers of the conformance suite, shared with adapter tests: states, snapshots and the
check that bad input changes nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import unisim
from unisim import ContractViolation, SimBackend


def random_state(inv: unisim.Inventory, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A valid, off-nominal state: random base pose, joints at random half-range values."""
    g = torch.Generator().manual_seed(seed)
    qpos = torch.zeros(n, inv.widths.nq)
    for j in inv.joints:
        a = j.qpos_adr
        if j.kind == "free":
            qpos[:, a:a + 3] = torch.tensor([0.3, -0.2, 0.85]) + 0.05 * torch.randn(n, 3, generator=g)
            quat = torch.randn(n, 4, generator=g)
            qpos[:, a + 3:a + 7] = quat / quat.norm(dim=1, keepdim=True)
        elif j.kind == "ball":
            quat = torch.randn(n, 4, generator=g)
            qpos[:, a:a + 4] = quat / quat.norm(dim=1, keepdim=True)
        else:
            lo, hi = j.range if j.range is not None else (-1.0, 1.0)
            mid, half = (lo + hi) / 2, (hi - lo) / 2
            qpos[:, a] = mid + 0.5 * half * (2 * torch.rand(n, generator=g) - 1)
    qvel = 0.5 * torch.randn(n, inv.widths.nv, generator=g)
    return qpos, qvel


def to(backend: SimBackend, *tensors: torch.Tensor):
    return tuple(t.to(backend.device) for t in tensors)


def snapshot(backend: SimBackend) -> dict[str, torch.Tensor]:
    v = backend.views()
    return {f: getattr(v, f).detach().to("cpu").clone() for f in
            ("qpos", "qvel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w", "sensordata")}


def all_rows(backend: SimBackend) -> torch.Tensor:
    return torch.arange(backend.num_envs, device=backend.device)


def physics_steps(backend: SimBackend) -> int:
    return int(backend.diagnostics()["physics_steps"])


def quat_close(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # q and -q are the same rotation.
    return torch.minimum((a - b).abs().amax(-1), (a + b).abs().amax(-1))


def full_state_with_rows(backend: SimBackend, rows: list[int], seed: int):
    """(mask, qpos, qvel) of full size: ``rows`` get a random state, every other row holds
    NaN, which set_state_where must neither read nor reject."""
    n, (nq, nv, _) = backend.num_envs, backend.state_widths()
    qpos, qvel = torch.full((n, nq), float("nan")), torch.full((n, nv), float("nan"))
    new_q, new_v = random_state(backend.inventory(), len(rows), seed)
    qpos[rows], qvel[rows] = new_q, new_v
    mask = torch.zeros(n, dtype=torch.bool)
    mask[rows] = True
    return (*to(backend, mask, qpos, qvel), new_q, new_v)


def assert_rejected_unchanged(backend: SimBackend, arg: str, call: Callable[[], object]) -> None:
    """``call`` raises ContractViolation naming ``arg`` and leaves every view as it was."""
    before = snapshot(backend)
    with pytest.raises(ContractViolation, match=arg):
        call()
    after = snapshot(backend)
    assert all(torch.equal(before[k], after[k]) for k in before)
