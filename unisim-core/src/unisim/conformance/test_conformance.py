"""SimBackend contract v1.x conformance checks (see unisim.conformance for how to run)."""

from __future__ import annotations

import pytest
import torch

import unisim
from unisim import ContractViolation, DataPlane, Feature, ResetPublication
from unisim.conformance.states import (
    all_rows,
    assert_rejected_unchanged,
    full_state_with_rows,
    physics_steps,
    quat_close,
    random_state,
    snapshot,
    to,
)
from unisim.host_sync import HostSyncProbe

TOL = 2e-4  # float32 kinematics agree with MuJoCo C to ~1e-6; dynamics are never compared


# ---- fixtures: conftest.py (backend, reference, case, num_envs) ---------------------
# ---- declaration ---------------------------------------------------------------------
def test_declaration_is_valid_and_matches_views(backend):
    caps = backend.capabilities
    assert isinstance(caps, unisim.Capabilities)
    assert isinstance(caps.data_plane, DataPlane)
    assert isinstance(caps.selected_reset_publication, ResetPublication)
    for name, t in snapshot(backend).items():
        assert getattr(backend.views(), name).device == caps.device, name
        assert t.dtype == torch.float32, name
    kinds = {s.kind for s in backend.inventory().sensors}
    assert kinds <= caps.sensor_kinds, f"model sensors {kinds} beyond declared {caps.sensor_kinds}"
    if caps.data_plane is DataPlane.HOST_BRIDGE:
        assert not caps.has(Feature.GRAPH_CAPTURE)
    diagnostics = backend.diagnostics()
    assert "physics_steps" in diagnostics
    # 1.4: an int, or None where the adapter cannot tell.
    altered = diagnostics["altered_worlds"]
    assert altered is None or (isinstance(altered, int) and 0 <= altered <= backend.num_envs), altered


def test_widths_match_view_shapes(backend):
    nq, nv, nu = backend.state_widths()
    inv = backend.inventory()
    n, nbody = backend.num_envs, len(inv.bodies)
    v = backend.views()
    assert v.qpos.shape == (n, nq) and v.qvel.shape == (n, nv)
    assert v.body_pos_w.shape == (n, nbody, 3) and v.body_quat_w.shape == (n, nbody, 4)
    assert v.body_lin_vel_w.shape == (n, nbody, 3) and v.body_ang_vel_w.shape == (n, nbody, 3)
    assert len(inv.actuators) == nu
    assert inv.bodies[0].index == 0 and inv.body_views_include_world


def test_inventory_sensor_widths_tile_sensordata(backend):
    inv = backend.inventory()
    assert backend.views().sensordata.shape == (backend.num_envs, inv.nsensordata)
    adr = 0
    for s in inv.sensors:
        assert s.adr == adr, f"sensor {s.name} at {s.adr}, expected {adr}"
        adr += s.width


def test_views_are_live_objects(backend):
    first = backend.views()
    backend.step(torch.zeros(backend.num_envs, backend.state_widths().nu, device=backend.device), 1)
    assert backend.views().qpos is first.qpos or backend.views().qpos.data_ptr() == first.qpos.data_ptr()


# ---- stepping ------------------------------------------------------------------------
def test_step_is_finite_and_advances(backend):
    qpos, qvel = to(backend, *random_state(backend.inventory(), backend.num_envs, 1))
    backend.set_state(all_rows(backend), qpos, qvel)
    before = snapshot(backend)
    steps = physics_steps(backend)
    ctrl = torch.zeros(backend.num_envs, backend.state_widths().nu, device=backend.device)
    for _ in range(3):
        backend.step(ctrl, substeps=2)
    after = snapshot(backend)
    assert physics_steps(backend) == steps + 6
    for name, t in after.items():
        assert torch.isfinite(t).all(), name
    assert not torch.equal(before["qpos"], after["qpos"])


# ---- selected reset ------------------------------------------------------------------
def test_selected_reset_is_authoritative_without_a_step(backend, reference):
    n = backend.num_envs
    base_q, base_v = random_state(backend.inventory(), n, 2)
    backend.set_state(all_rows(backend), *to(backend, base_q, base_v))
    rows = torch.tensor([0, n - 1] if n > 1 else [0])
    new_q, new_v = random_state(backend.inventory(), len(rows), 3)
    steps = physics_steps(backend)
    backend.set_state(rows.to(backend.device), *to(backend, new_q, new_v))
    assert physics_steps(backend) == steps, "set_state must not step physics"
    got = snapshot(backend)  # reading views is the point where LAZY publication completes

    reference.set_state(torch.arange(len(rows)), new_q, new_v)
    want = snapshot(reference)
    k = len(rows)
    for name in ("qpos", "qvel", "body_pos_w", "body_lin_vel_w", "body_ang_vel_w", "sensordata"):
        err = (got[name][rows] - want[name][:k]).abs().max().item() if got[name].numel() else 0.0
        assert err < TOL, f"{name} of reset rows differs from mj_forward reference by {err}"
    assert quat_close(got["body_quat_w"][rows], want["body_quat_w"][:k]).max() < TOL


def test_selected_reset_leaves_other_rows_untouched(backend):
    n = backend.num_envs
    if n < 2:
        pytest.skip("needs at least 2 envs")
    backend.set_state(all_rows(backend), *to(backend, *random_state(backend.inventory(), n, 4)))
    backend.step(torch.zeros(n, backend.state_widths().nu, device=backend.device), 1)
    before = snapshot(backend)
    rows = torch.tensor([1])
    backend.set_state(rows.to(backend.device), *to(backend, *random_state(backend.inventory(), 1, 5)))
    after = snapshot(backend)
    others = torch.tensor([i for i in range(n) if i != 1])
    for name in before:
        assert torch.equal(before[name][others], after[name][others]), f"{name} of untouched rows changed"


def test_empty_row_selection_is_a_no_op(backend):
    before = snapshot(backend)
    nq, nv, _ = backend.state_widths()
    empty = torch.zeros(0, dtype=torch.int64, device=backend.device)
    backend.set_state(empty, torch.zeros(0, nq, device=backend.device), torch.zeros(0, nv, device=backend.device))
    after = snapshot(backend)
    for name in before:
        assert torch.equal(before[name], after[name])


def test_strided_rows_mask_and_states_write_what_dense_ones_write(backend):
    # Columns or strided slices of larger tensors are valid inputs; an engine kernel that
    # refused them had written half a state before failing.
    n = backend.num_envs
    nq, nv, _ = backend.state_widths()
    q, v = to(backend, *random_state(backend.inventory(), n, 21))
    backend.set_state(all_rows(backend), q, v)
    want = snapshot(backend)
    backend.set_state(all_rows(backend), *to(backend, *random_state(backend.inventory(), n, 22)))
    flags = torch.zeros(n, 2, dtype=torch.bool, device=backend.device)
    flags[:, 0] = True
    wide_q = torch.zeros(n, 2 * nq, device=backend.device)
    wide_q[:, ::2] = q
    wide_v = torch.zeros(n, 2 * nv, device=backend.device)
    wide_v[:, ::2] = v
    backend.set_state_where(flags[:, 0], wide_q[:, ::2], wide_v[:, ::2])
    got = snapshot(backend)
    assert torch.equal(got["qpos"], want["qpos"]) and torch.equal(got["qvel"], want["qvel"])
    assert torch.allclose(got["body_pos_w"], want["body_pos_w"], atol=1e-6)  # the masked write's kinematics
    rows = torch.arange(2 * n, device=backend.device)[::2] // 2  # 0 .. n-1, strided
    backend.set_state(rows, q, v)
    assert torch.equal(snapshot(backend)["qpos"], want["qpos"])


def test_a_reset_may_copy_rows_from_the_live_views(backend):
    # Copying the first envs' states into the last ones reads (a dense slice of) the very
    # views the write overwrites.
    n = backend.num_envs
    if n < 2:
        pytest.skip("needs at least 2 envs")
    backend.set_state(all_rows(backend), *to(backend, *random_state(backend.inventory(), n, 23)))
    views, k = backend.views(), n // 2
    source_q, source_v = views.qpos[:k].detach().cpu().clone(), views.qvel[:k].detach().cpu().clone()
    backend.set_state(torch.arange(n - k, n, device=backend.device), views.qpos[:k], views.qvel[:k])
    got = snapshot(backend)
    assert torch.equal(got["qpos"][n - k:], source_q) and torch.equal(got["qvel"][n - k:], source_v)


# ---- selected reset by mask (contract 1.1) --------------------------------------------
def test_masked_reset_is_authoritative_and_leaves_other_rows_untouched(backend, reference):
    n = backend.num_envs
    backend.set_state(all_rows(backend), *to(backend, *random_state(backend.inventory(), n, 8)))
    backend.step(torch.zeros(n, backend.state_widths().nu, device=backend.device), 1)
    before = snapshot(backend)
    rows = [0, n - 1] if n > 1 else [0]
    mask, qpos, qvel, new_q, new_v = full_state_with_rows(backend, rows, 9)
    steps = physics_steps(backend)
    backend.set_state_where(mask, qpos, qvel)
    assert physics_steps(backend) == steps, "set_state_where must not step physics"
    got = snapshot(backend)
    reference.set_state(torch.arange(len(rows)), new_q, new_v)
    want = snapshot(reference)
    for name in ("qpos", "qvel", "body_pos_w", "body_lin_vel_w", "body_ang_vel_w", "sensordata"):
        err = (got[name][rows] - want[name][:len(rows)]).abs().max().item() if got[name].numel() else 0.0
        assert err < TOL, f"{name} of masked rows differs from mj_forward reference by {err}"
    assert quat_close(got["body_quat_w"][rows], want["body_quat_w"][:len(rows)]).max() < TOL
    others = torch.tensor([i for i in range(n) if i not in rows], dtype=torch.int64)
    for name in before:
        assert torch.equal(before[name][others], got[name][others]), f"{name} of unmasked rows changed"


def test_a_full_mask_writes_what_set_state_of_every_row_writes(backend):
    n = backend.num_envs
    qpos, qvel = to(backend, *random_state(backend.inventory(), n, 13))
    backend.set_state(all_rows(backend), qpos, qvel)
    by_rows = snapshot(backend)
    backend.step(torch.zeros(n, backend.state_widths().nu, device=backend.device), 1)  # move away first
    backend.set_state_where(torch.ones(n, dtype=torch.bool, device=backend.device), qpos, qvel)
    by_mask = snapshot(backend)
    for name in by_rows:
        assert torch.equal(by_rows[name], by_mask[name]), name


def test_all_false_mask_is_a_no_op(backend):
    before = snapshot(backend)
    mask, qpos, qvel, _, _ = full_state_with_rows(backend, [], 10)
    backend.set_state_where(mask, qpos, qvel)
    after = snapshot(backend)
    for name in before:
        assert torch.equal(before[name], after[name])


def test_masked_reset_needs_no_host_sync_where_declared(case, num_envs):
    """DEVICE_MASKED_RESET: nothing set_state_where dispatches makes the host wait."""
    name, device, model = case
    b = unisim.create_backend(name, model=model, num_envs=num_envs, device=device, validate=False)
    try:
        if not b.capabilities.has(Feature.DEVICE_MASKED_RESET):
            pytest.skip("backend does not declare DEVICE_MASKED_RESET")
        mask, qpos, qvel, _, _ = full_state_with_rows(b, [0], 11)
        with HostSyncProbe() as probe:
            b.set_state_where(mask, qpos, qvel)
        assert probe.syncs == []
        assert probe.op_count > 0  # the probe saw the writes, so an empty list means something
    finally:
        b.close()


def _bad_masked_reset_inputs(backend):
    n, dev = backend.num_envs, backend.device
    nq, nv, _ = backend.state_widths()
    mask, qpos, qvel, _, _ = full_state_with_rows(backend, [0], 12)
    nan_in_row = qpos.clone()
    nan_in_row[0, 0] = float("nan")
    zero_quat_in_row = qpos.clone()
    free = [j for j in backend.inventory().joints if j.kind == "free"]
    if free:
        zero_quat_in_row[0, free[0].qpos_adr + 3:free[0].qpos_adr + 7] = 0.0
    return {
        "mask wrong dtype": ("mask", mask.long(), qpos, qvel),
        "mask wrong length": ("mask", torch.ones(n + 1, dtype=torch.bool, device=dev), qpos, qvel),
        "mask not a tensor": ("mask", [True] * n, qpos, qvel),
        "qpos row count": ("qpos", mask, qpos[:1], qvel),
        "qvel wrong width": ("qvel", mask, qpos, torch.zeros(n, nv + 1, device=dev)),
        "qpos non-finite in a masked row": ("qpos", mask, nan_in_row, qvel),
        "qvel with autograd": ("qvel", mask, qpos, qvel.clone().requires_grad_()),
        **({"qpos zero quaternion in a masked row": ("qpos", mask, zero_quat_in_row, qvel)} if free else {}),
    }


@pytest.mark.parametrize("kind", ["mask wrong dtype", "mask wrong length", "mask not a tensor", "qpos row count",
                                  "qvel wrong width", "qpos non-finite in a masked row", "qvel with autograd",
                                  "qpos zero quaternion in a masked row"])
def test_bad_masked_reset_is_rejected_and_changes_nothing(backend, kind):
    inputs = _bad_masked_reset_inputs(backend)
    if kind not in inputs:
        pytest.skip("the model has no free joint")
    arg, mask, qpos, qvel = inputs[kind]
    assert_rejected_unchanged(backend, arg, lambda: backend.set_state_where(mask, qpos, qvel))


# ---- determinism ---------------------------------------------------------------------
def test_determinism_where_declared(backend, case):
    if not backend.capabilities.has(Feature.DETERMINISTIC):
        pytest.skip("backend does not declare DETERMINISTIC")
    name, device, model = case
    twin = unisim.create_backend(name, model=model, num_envs=backend.num_envs, device=device)
    try:
        state = to(backend, *random_state(backend.inventory(), backend.num_envs, 6))
        ctrl = 0.1 * torch.ones(backend.num_envs, backend.state_widths().nu, device=backend.device)
        results = []
        for b in (backend, twin):
            b.set_state(all_rows(b), *state)
            for _ in range(3):
                b.step(ctrl, 2)
            results.append(snapshot(b))
        for key in results[0]:
            assert torch.equal(results[0][key], results[1][key]), key
    finally:
        twin.close()


# ---- bad input -----------------------------------------------------------------------
def _bad_step_inputs(backend):
    n, nu, dev = backend.num_envs, backend.state_widths().nu, backend.device
    other = torch.device("meta")
    nan = torch.zeros(n, nu, device=dev)
    nan[0, 0] = float("nan")
    return {
        "wrong shape": torch.zeros(n, nu + 1, device=dev),
        "wrong rows": torch.zeros(n + 1, nu, device=dev),
        "wrong dtype": torch.zeros(n, nu, dtype=torch.float64, device=dev),
        "wrong device": torch.zeros(n, nu, device=other),
        "non-finite": nan,
        "not a tensor": [[0.0] * nu] * n,
    }


@pytest.mark.parametrize("kind", ["wrong shape", "wrong rows", "wrong dtype", "wrong device", "non-finite",
                                  "not a tensor"])
def test_bad_ctrl_is_rejected_and_changes_nothing(backend, kind):
    steps = physics_steps(backend)
    assert_rejected_unchanged(backend, "ctrl", lambda: backend.step(_bad_step_inputs(backend)[kind], 1))
    assert physics_steps(backend) == steps


def test_bad_substeps_is_rejected(backend):
    ctrl = torch.zeros(backend.num_envs, backend.state_widths().nu, device=backend.device)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ContractViolation, match="substeps"):
            backend.step(ctrl, bad)


def _bad_reset_inputs(backend):
    n, dev = backend.num_envs, backend.device
    nq, nv, _ = backend.state_widths()
    q, v = to(backend, *random_state(backend.inventory(), 1, 7))
    q2, v2 = to(backend, *random_state(backend.inventory(), 2, 7))
    nanq = q.clone()
    nanq[0, -1] = float("inf")
    nanv = v.clone()
    nanv[0, 0] = float("nan")
    zeroq = q.clone()
    free = [j for j in backend.inventory().joints if j.kind == "free"]
    if free:
        zeroq[0, free[0].qpos_adr + 3:free[0].qpos_adr + 7] = 0.0
    row = torch.tensor([0], device=dev)
    return {
        "rows duplicated": ("rows", torch.tensor([0, 0], device=dev), q2, v2),
        "rows out of range": ("rows", torch.tensor([n], device=dev), q, v),
        "rows negative": ("rows", torch.tensor([-1], device=dev), q, v),
        "rows wrong dtype": ("rows", torch.tensor([0], dtype=torch.int32, device=dev), q, v),
        "rows 2-D": ("rows", torch.tensor([[0]], device=dev), q, v),
        "qpos wrong width": ("qpos", row, torch.zeros(1, nq + 1, device=dev), v),
        "qvel wrong width": ("qvel", row, q, torch.zeros(1, nv - 1, device=dev)),
        "qpos count mismatch": ("qpos", row, q2, v),
        "qpos non-finite": ("qpos", row, nanq, v),
        "qvel non-finite": ("qvel", row, q, nanv),
        "qpos wrong dtype": ("qpos", row, q.double(), v),
        "qvel with autograd": ("qvel", row, q, v.clone().requires_grad_()),
        **({"qpos zero quaternion": ("qpos", row, zeroq, v)} if free else {}),
    }


@pytest.mark.parametrize("kind", ["rows duplicated", "rows out of range", "rows negative", "rows wrong dtype",
                                  "rows 2-D", "qpos wrong width", "qvel wrong width", "qpos count mismatch",
                                  "qpos non-finite", "qvel non-finite", "qpos wrong dtype", "qvel with autograd",
                                  "qpos zero quaternion"])
def test_bad_set_state_is_rejected_and_changes_nothing(backend, kind):
    inputs = _bad_reset_inputs(backend)
    if kind not in inputs:
        pytest.skip("the model has no free joint")
    arg, rows, qpos, qvel = inputs[kind]
    assert_rejected_unchanged(backend, arg, lambda: backend.set_state(rows, qpos, qvel))


def test_close_is_idempotent_and_every_call_after_it_is_refused(case):
    name, device, model = case
    b = unisim.create_backend(name, model=model, num_envs=1, device=device)
    nq, nv, nu = b.state_widths()
    q, v = to(b, *random_state(b.inventory(), 1, 24))
    row, dev = torch.zeros(1, dtype=torch.int64, device=b.device), b.device
    b.close()
    b.close()  # a second close is a no-op
    calls = {
        "step": lambda: b.step(torch.zeros(1, nu, device=dev), 1),
        "set_state": lambda: b.set_state(row, q, v),
        "set_state_where": lambda: b.set_state_where(torch.ones(1, dtype=torch.bool, device=dev), q, v),
        "model_field": lambda: b.model_field("geom_friction"),
        "set_model_field": lambda: b.set_model_field("geom_friction", row, torch.zeros(1, device=dev)),
    }
    for call, fn in calls.items():
        with pytest.raises(ContractViolation, match=r"used after close\(\)"):
            fn()


def test_num_envs_below_one_is_rejected(case):
    name, device, model = case
    for bad in (0, -3):
        with pytest.raises(ContractViolation, match="num_envs"):
            unisim.create_backend(name, model=model, num_envs=bad, device=device)


def test_missing_model_path_is_rejected(case):
    name, device, _ = case
    with pytest.raises(ContractViolation, match="does not exist"):
        unisim.create_backend(name, model="/nonexistent/scene.xml", num_envs=1, device=device)


def test_mjcf_that_does_not_compile_keeps_the_compiler_message(case):
    name, device, _ = case
    bad = "<mujoco><worldbody><body><geom type='sphere' size='-1'/></body></worldbody></mujoco>"
    with pytest.raises(ContractViolation, match="size"):
        unisim.create_backend(name, model=bad, num_envs=1, device=device)


def test_unknown_and_shelved_backends_fail_closed():
    scope = unisim.backend_scope()
    with pytest.raises(ContractViolation, match="valid backends"):
        unisim.create_backend("no_such_engine", model="<mujoco/>", num_envs=1)
    for shelved in scope.shelved:
        with pytest.raises(ContractViolation, match="gated out") as info:
            unisim.create_backend(shelved, model="<mujoco/>", num_envs=1)
        assert all(active in str(info.value) for active in scope.active)
