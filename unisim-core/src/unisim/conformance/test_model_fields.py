"""Conformance of model-field writes (``capabilities.model_fields``): declared fields round
trip per row, bad writes are refused and change nothing, and a write changes the physics of
its own row only."""

from __future__ import annotations

import pytest
import torch

from unisim import ContractViolation
from unisim.conformance.states import all_rows, random_state, snapshot, to


def test_undeclared_model_field_is_rejected(backend):
    with pytest.raises(ContractViolation, match="not declared"):
        backend.model_field("definitely_not_a_field")


def test_a_model_field_name_that_is_not_a_str_is_a_contract_violation(backend):
    rows = torch.zeros(1, dtype=torch.int64, device=backend.device)
    for bad in (["geom_friction"], None, 3):
        with pytest.raises(ContractViolation, match="name: expected a model field name"):
            backend.model_field(bad)
        with pytest.raises(ContractViolation, match="name: expected a model field name"):
            backend.set_model_field(bad, rows, torch.zeros(1, device=backend.device))


def declared_fields(backend) -> list[str]:
    """The backend's writable model fields; the calling test is skipped where it declares none."""
    fields = sorted(backend.capabilities.model_fields)
    if not fields:
        pytest.skip("backend declares no model-field writes")
    return fields


def test_every_declared_model_field_round_trips(backend):
    rows = torch.tensor([0], device=backend.device)
    for name in declared_fields(backend):
        current = backend.model_field(name)
        backend.set_model_field(name, rows, current[:1] * 1.5 + 0.01)  # + 0.01: moves zero entries too
        updated = backend.model_field(name)
        assert torch.allclose(updated[0], current[0] * 1.5 + 0.01), name
        if backend.num_envs > 1:
            assert torch.equal(updated[1:], current[1:]), name
        backend.set_model_field(name, rows, current[:1])


def test_model_field_values_of_the_wrong_shape_are_rejected_and_change_nothing(backend):
    rows = torch.tensor([0], device=backend.device)
    for name in declared_fields(backend):
        current = backend.model_field(name)
        for bad in (current[:1, ..., :-1], current[:2]):  # trailing shape off; more rows than given
            with pytest.raises(ContractViolation, match="values"):
                backend.set_model_field(name, rows, bad.clone())
        assert torch.equal(backend.model_field(name), current), f"a refused {name} write changed the field"


def test_values_below_a_declared_minimum_are_rejected_and_change_nothing(backend):
    """Contract 1.2: a validated set_model_field keeps to capabilities.model_field_minimums."""
    minimums = dict(backend.capabilities.model_field_minimums)
    if not minimums:
        pytest.skip("backend declares no model-field minimums")
    for name, low in minimums.items():
        current = backend.model_field(name)
        below = current[:1].clone()
        below[..., :] = torch.tensor(low, device=backend.device) - 1.0  # every element under its floor
        rows = torch.tensor([0], device=backend.device)
        with pytest.raises(ContractViolation, match=f"values: expected every {name} element >="):
            backend.set_model_field(name, rows, below)
        assert torch.equal(backend.model_field(name), current), f"a refused {name} write changed the field"


def test_a_centre_of_mass_write_changes_the_physics_of_its_row_only(backend):
    """``body_ipos`` moves each body's centre of mass in its own frame: the row written falls
    differently under gravity from identical rows that were not written."""
    if "body_ipos" not in backend.capabilities.model_fields:
        pytest.skip("backend does not declare body_ipos writes")
    n = backend.num_envs
    if n < 3:
        pytest.skip("needs 3 envs: one moved, two to compare")
    qpos, qvel = random_state(backend.inventory(), 1, 11)
    state = to(backend, qpos.repeat(n, 1), qvel.repeat(n, 1))
    ipos = backend.model_field("body_ipos")
    moved = ipos[:1].clone()
    moved[0, 1:, 0] += 0.05  # every body but the world's, 5 cm along its own x
    rows = torch.tensor([0], device=backend.device)
    backend.set_model_field("body_ipos", rows, moved)
    try:
        backend.set_state(all_rows(backend), *state)
        ctrl = torch.zeros(n, backend.state_widths().nu, device=backend.device)
        for _ in range(10):
            backend.step(ctrl, 2)
        qpos_after = snapshot(backend)["qpos"]
    finally:
        backend.set_model_field("body_ipos", rows, ipos[:1])
    written = (qpos_after[0] - qpos_after[1]).abs().max().item()
    unwritten = (qpos_after[1] - qpos_after[2]).abs().max().item()
    assert written > 1e-4 and written > 100 * unwritten, (written, unwritten)
