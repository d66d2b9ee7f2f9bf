"""mjwarp adapter behaviour beyond the conformance suite (warp's CPU device, small num_envs)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import unisim
from sim_test_models import mj_reference, random_model_state, with_sensors
from unisim import ContractViolation, DataPlane, Feature, ResetPublication
from unisim.adapters import mjwarp
from unisim.mjcf import sensor_kind

pytest.importorskip("mujoco_warp")

N = 4

# The built-in model plus one sensor of every kind the adapter declares, on sites, bodies,
# geoms and a ball joint, so each declared kind is pinned against MuJoCo C.
ALL_KINDS_SENSORS = """
  <sensor>
    <gyro site="imu"/> <velocimeter site="imu"/> <jointpos joint="left_knee"/> <jointvel joint="left_hip"/>
    <ballquat joint="wrist"/> <ballangvel joint="wrist"/>
    <framepos objtype="site" objname="imu"/> <framequat objtype="body" objname="left_leg"/>
    <framexaxis objtype="geom" objname="left_foot_geom"/> <frameyaxis objtype="xbody" objname="left_foot"/>
    <framezaxis objtype="site" objname="imu"/> <framelinvel objtype="site" objname="imu"/>
    <frameangvel objtype="body" objname="left_foot"/>
    <subtreecom body="torso"/> <subtreelinvel body="torso"/> <subtreeangmom body="torso"/> <clock/>
  </sensor>"""


def all_kinds_model(builtin: str) -> str:
    return with_sensors(builtin, ALL_KINDS_SENSORS).replace(
        '<body name="right_leg"', '<body name="hand" pos="0.1 0 0.06"><joint name="wrist" type="ball"/>'
        '<geom type="sphere" size="0.03" mass="0.2"/></body>\n      <body name="right_leg"', 1)


def assert_views_match(views: unisim.BackendViews, rows: torch.Tensor, ref: dict[str, np.ndarray],
                       tol: float = 2e-5) -> None:
    for key, want in ref.items():
        got = getattr(views, key)[rows].double().cpu().numpy()
        if key == "body_quat_w":  # q and -q are one rotation
            err = np.minimum(np.abs(got - want).max(-1), np.abs(got + want).max(-1)).max()
        else:
            err = np.abs(got - want).max() if want.size else 0.0
        assert err < tol, f"{key} differs from mj_forward by {err}"


@pytest.fixture(scope="module")
def backend(builtin_model):
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=N, device="cpu")
    yield b
    b.close()


def test_declares_a_device_plane_with_immediate_publication(backend):
    caps = backend.capabilities
    assert caps.data_plane is DataPlane.DEVICE
    assert caps.selected_reset_publication is ResetPublication.IMMEDIATE
    assert caps.device == torch.device("cpu")
    assert not caps.has(Feature.GRAPH_CAPTURE), "GRAPH_CAPTURE is a CUDA-graph promise"
    assert caps.sensor_kinds == mjwarp.SENSOR_KINDS
    assert backend.diagnostics()["step_mode"] in ("cpu_graph", "eager")


def test_views_are_the_same_memory_after_step_and_set_state(backend, builtin_model):
    views = backend.views()
    ptrs = {k: getattr(views, k).data_ptr() for k in ("qpos", "qvel", "body_pos_w", "body_lin_vel_w", "sensordata")}
    backend.step(torch.zeros(N, 3), 2)
    qpos, qvel = random_model_state(mujoco.MjModel.from_xml_path(builtin_model), 1, 0)
    backend.set_state(torch.tensor([2]), qpos, qvel)
    assert backend.views() is views
    assert {k: getattr(views, k).data_ptr() for k in ptrs} == ptrs


def test_views_after_step_describe_the_stepped_state(backend, builtin_model):
    # mjw.step leaves xpos/sensors at the pre-integration state; the adapter's publish pass
    # must make every view agree with the qpos/qvel it publishes.
    model = mujoco.MjModel.from_xml_path(builtin_model)
    backend.set_state(torch.arange(N), *random_model_state(model, N, 1))
    backend.step(0.3 * torch.ones(N, 3), 3)
    views = backend.views()
    assert_views_match(views, torch.arange(N), mj_reference(model, views.qpos.clone(), views.qvel.clone()))


def test_set_state_matches_mujoco_for_every_declared_sensor_kind(builtin_model):
    xml = all_kinds_model(builtin_model)
    model = mujoco.MjModel.from_xml_string(xml)
    kinds = {sensor_kind(model, s) for s in range(model.nsensor)}
    assert kinds == mjwarp.SENSOR_KINDS, "the pinned model must cover every declared kind"
    b = unisim.create_backend("mjwarp", model=xml, num_envs=3, device="cpu")
    try:
        rows = torch.tensor([0, 2])
        qpos, qvel = random_model_state(model, 2, 2)
        b.step(torch.zeros(3, 3), 1)  # nonzero time, so the clock sensor shows the reset too
        b.set_state(rows, qpos, qvel)
        assert_views_match(b.views(), rows, mj_reference(model, qpos, qvel))
    finally:
        b.close()


def test_set_state_leaves_other_rows_bitwise_untouched(backend, builtin_model):
    # The publish kernels recompute every world; rows not written must come out identical.
    model = mujoco.MjModel.from_xml_path(builtin_model)
    backend.set_state(torch.arange(N), *random_model_state(model, N, 3))
    backend.step(torch.zeros(N, 3), 2)
    views = backend.views()
    before = {k: getattr(views, k).clone() for k in ("qpos", "qvel", "body_pos_w", "body_quat_w",
                                                       "body_lin_vel_w", "body_ang_vel_w", "sensordata")}
    steps = backend.diagnostics()["physics_steps"]
    backend.set_state(torch.tensor([1]), *random_model_state(model, 1, 4))
    assert backend.diagnostics()["physics_steps"] == steps
    others = torch.tensor([0, 2, 3])
    for key, value in before.items():
        assert torch.equal(getattr(views, key)[others], value[others]), key
        assert not torch.equal(getattr(views, key)[1], value[1]), key


def test_graph_replay_and_eager_stepping_agree(builtin_model):
    model = mujoco.MjModel.from_xml_path(builtin_model)
    state = random_model_state(model, 2, 5)
    results = []
    for graph in (True, False):
        b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=2, device="cpu", graph=graph)
        b.set_state(torch.arange(2), *state)
        for _ in range(3):
            b.step(0.2 * torch.ones(2, 3), 2)
        results.append((b.views().qpos.clone(), b.views().sensordata.clone(), b.diagnostics()["step_mode"]))
        b.close()
    (q_graph, s_graph, mode_graph), (q_eager, s_eager, mode_eager) = results
    assert mode_eager == "eager" and mode_graph in ("cpu_graph", "eager")
    assert torch.allclose(q_graph, q_eager, atol=1e-6) and torch.allclose(s_graph, s_eager, atol=1e-6)


def test_a_step_graph_that_fails_to_capture_is_reported_as_eager(builtin_model):
    # The publish graph captured, then the step graph of one substeps count did not: that count
    # steps eagerly, and diagnostics must say so rather than keep reporting a graph.
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=2, device="cpu")
    try:
        assert b.diagnostics()["step_mode"] == "cpu_graph"
        real, calls = b._substeps, []

        def fails_once(substeps):
            calls.append(substeps)
            if len(calls) == 1:
                raise RuntimeError("not capturable")
            real(substeps)

        b._substeps = fails_once
        with pytest.warns(RuntimeWarning, match="graph capture failed on cpu: RuntimeError: not capturable"):
            b.step(torch.zeros(2, b.state_widths().nu), 3)
        assert len(calls) == 2  # the failed capture, then the eager run
        diagnostics = b.diagnostics()
        assert diagnostics["step_mode"] == "eager" and "not capturable" in diagnostics["eager_reason"]
        assert diagnostics["graphs_captured_substeps"] == [] and diagnostics["physics_steps"] == 3
    finally:
        b.close()


def test_contact_overflow_is_reported_cleared_by_set_state_and_kept_in_the_history(builtin_model):
    model = mujoco.MjModel.from_xml_path(builtin_model)
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=2, device="cpu", nconmax=1)
    try:
        qpos = torch.tensor(model.qpos0, dtype=torch.float32).repeat(2, 1)
        qpos[:, 2] = 0.3  # upright and low: every leg capsule touches the floor
        b.set_state(torch.arange(2), qpos, torch.zeros(2, model.nv))
        b.step(torch.zeros(2, 3), 1)
        diag = b.diagnostics()
        assert diag["nconmax_per_world"] == 1 and diag["overflow_worlds"] >= 1
        assert diag["overflow_kinds"], diag
        assert torch.isfinite(b.views().qpos).all(), "overflow drops contacts, never corrupts state"
        assert diag["overflow_worlds_since_build"] == diag["overflow_worlds"]
        assert diag["overflow_kinds_since_build"] == diag["overflow_kinds"]
        b.set_state(torch.arange(2), *random_model_state(model, 2, 7))
        after = b.diagnostics()
        assert after["overflow_worlds"] == 0 and after["overflow_kinds"] == []
        # The episodes that overflowed are gone; the history still counts their worlds.
        assert (after["overflow_worlds_since_build"], after["overflow_kinds_since_build"]) == (
            diag["overflow_worlds"], diag["overflow_kinds"])
        assert after["altered_worlds"] == diag["overflow_worlds"]  # the contract's count of the same
    finally:
        b.close()
    # The masked reset keeps the history too (a fresh backend: no history from the reset above).
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=2, device="cpu", nconmax=1)
    try:
        b.set_state(torch.arange(2), qpos, torch.zeros(2, model.nv))
        b.step(torch.zeros(2, 3), 1)
        overflowed = b.diagnostics()["overflow_worlds"]
        b.set_state_where(torch.tensor([True, True]), *random_model_state(model, 2, 8))
        after = b.diagnostics()
        assert after["overflow_worlds"] == 0 and after["overflow_worlds_since_build"] == overflowed >= 1
    finally:
        b.close()


def test_buffers_are_sized_from_the_model(backend):
    diag = backend.diagnostics()
    assert diag["naconmax"] == diag["nconmax_per_world"] * N
    assert diag["njmax"] >= 64 and diag["overflow_worlds"] == 0


@pytest.mark.parametrize("field, scale", [("geom_friction", 0.2), ("body_mass", 3.0)])
def test_model_field_writes_reach_the_captured_physics(builtin_model, field, scale):
    # Rows 0 and 1 start alike; only row 0's field is written, after the step graph was
    # captured, so the graph must read the new per-env values for the rows to diverge.
    model = mujoco.MjModel.from_xml_path(builtin_model)
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=2, device="cpu")
    try:
        qvel = torch.zeros(2, model.nv)
        qvel[:, 0] = 1.0  # sliding forward on the left foot
        b.set_state(torch.arange(2), torch.tensor(model.qpos0, dtype=torch.float32).repeat(2, 1), qvel)
        b.step(torch.zeros(2, 3), 2)
        values = b.model_field(field)
        b.set_model_field(field, torch.tensor([0]), values[:1] * scale)
        assert torch.equal(b.model_field(field)[1], values[1]), "row 1 must keep its value"
        for _ in range(20):
            b.step(torch.zeros(2, 3), 2)
        q = b.views().qpos
        assert torch.isfinite(q).all()
        assert (q[0] - q[1]).abs().max() > 1e-2, f"{field} write did not change row 0's physics"
    finally:
        b.close()


def test_a_mass_write_updates_the_subtree_sensors_as_mujoco_does(builtin_model):
    """subtreecom and subtreelinvel divide by the subtree's mass, a derived constant: a written
    row reads what MuJoCo reads once mj_setConst has recomputed it, an unwritten row is unchanged."""
    xml = all_kinds_model(builtin_model)
    model = mujoco.MjModel.from_xml_string(xml)
    b = unisim.create_backend("mjwarp", model=xml, num_envs=2, device="cpu")
    try:
        mass = b.model_field("body_mass")
        heavier = mass[:1].clone()
        heavier[0, 2:] *= 3.0  # every body below the torso's first child: its subtree tilts
        b.set_model_field("body_mass", torch.tensor([0]), heavier)
        qpos, qvel = random_model_state(model, 2, 5)
        b.set_state(torch.arange(2), qpos, qvel)
        written = mujoco.MjModel.from_xml_string(xml)
        written.body_mass[:] = heavier[0].double().numpy()
        mujoco.mj_setConst(written, mujoco.MjData(written))
        assert_views_match(b.views(), torch.tensor([0]), mj_reference(written, qpos[:1], qvel[:1]))
        assert_views_match(b.views(), torch.tensor([1]), mj_reference(model, qpos[1:], qvel[1:]))
    finally:
        b.close()


def test_friction_that_would_make_mujoco_warp_nan_is_refused(backend):
    friction = backend.model_field("geom_friction")
    with pytest.raises(ContractViolation, match="geom_friction"):
        backend.set_model_field("geom_friction", torch.tensor([0]), friction[:1] * 0.0)
    assert torch.equal(backend.model_field("geom_friction"), friction), "a refused write changes nothing"


def test_zero_mass_on_a_massive_body_is_refused_and_changes_nothing(backend):
    mass = backend.model_field("body_mass")
    body = int((mass[0] > 0).nonzero()[0, 0])
    bad = mass[:1].clone()
    bad[0, body] = 0.0
    with pytest.raises(unisim.ContractViolation, match="body_mass"):
        backend.set_model_field("body_mass", torch.tensor([0], device=backend.device), bad)
    assert torch.equal(backend.model_field("body_mass"), mass)


def test_accelerometer_is_refused(builtin_model):
    xml = Path(builtin_model).read_text().replace("<sensor>", '<sensor><accelerometer site="imu"/>')
    with pytest.raises(ContractViolation, match="accelerometer"):
        unisim.create_backend("mjwarp", model=xml, num_envs=1, device="cpu")


@pytest.mark.parametrize("options, match", [
    ({"nconmax": 0}, "nconmax"), ({"njmax": -2}, "njmax"), ({"nconmax": 1.5}, "nconmax"),
    ({"graph": "yes"}, "graph"), ({"nthread": 2}, "unknown mjwarp option"),
])
def test_bad_options_are_refused(builtin_model, options, match):
    with pytest.raises(ContractViolation, match=match):
        unisim.create_backend("mjwarp", model=builtin_model, num_envs=1, device="cpu", **options)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_step_is_ordered_with_torch_work_on_a_side_stream(builtin_model):
    # ctrl written on a non-default torch stream must be what the graph reads: the graph is
    # launched on the caller's current torch stream, so no sync is needed in between.
    b = unisim.create_backend("mjwarp", model=builtin_model, num_envs=N, device="cuda")
    try:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            ctrl = torch.full((N, 3), 0.5, device="cuda")
            b.step(ctrl, 2)
            qpos = b.views().qpos.clone()
        side.synchronize()
        assert torch.isfinite(qpos).all()
        assert b.diagnostics()["step_mode"] == "cuda_graph"
        assert b.capabilities.has(Feature.GRAPH_CAPTURE)
    finally:
        b.close()


def test_on_warps_cpu_device_it_warns_once_naming_the_mujoco_backend(builtin_model, monkeypatch, capsys):
    monkeypatch.setattr(mjwarp, "_WARNED_CPU", False)
    for _ in range(2):
        unisim.create_backend("mjwarp", model=builtin_model, num_envs=1, device="cpu")
    err = capsys.readouterr().err
    assert err.count("Warp's CPU device") == 1 and "--backend mujoco" in err
