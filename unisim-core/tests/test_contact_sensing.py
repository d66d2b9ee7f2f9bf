"""Contact sensing beyond the conformance suite: sensor layout, mjwarp's device path."""

from __future__ import annotations

import pytest
import torch
import unisim
from unisim import ContactSensorSpec
from unisim.conformance import CONTACT_PROBE_MODEL
from unisim.conformance.states import random_state
from unisim.host_sync import HostSyncProbe


@pytest.mark.parametrize("name", ["mujoco", "mjwarp"])
def test_requested_contact_sensors_leave_the_models_own_sensordata_as_it_was(builtin_model, name):
    """Contact sensing leaves the model's own sensors as they were (mujoco appends MuJoCo contact
    sensors after them, mjwarp adds nothing to the model): same columns, values and inventory."""
    if name == "mjwarp":
        pytest.importorskip("mujoco_warp")
    plain = unisim.create_backend(name, model=builtin_model, num_envs=2, device="cpu")
    sensed = unisim.create_backend(name, model=builtin_model, num_envs=2, device="cpu", contact_sensors=[
        ContactSensorSpec("feet", ("left_foot", "right_leg"), with_bodies=("world",))])
    try:
        assert sensed.inventory() == plain.inventory()
        state = random_state(plain.inventory(), 2, 3)
        ctrl = torch.zeros(2, plain.state_widths().nu)
        for b in (plain, sensed):
            b.set_state(torch.arange(2), *state)
            for _ in range(3):
                b.step(ctrl, 2)
        assert sensed.views().sensordata.shape == plain.views().sensordata.shape
        assert torch.equal(sensed.views().sensordata, plain.views().sensordata)
        assert torch.equal(sensed.views().qpos, plain.views().qpos), "contact sensors change no dynamics"
    finally:
        plain.close()
        sensed.close()


def test_mjwarp_contact_sensing_runs_in_the_step_graph_without_a_host_sync():
    pytest.importorskip("mujoco_warp")
    b = unisim.create_backend("mjwarp", model=str(CONTACT_PROBE_MODEL), num_envs=2, device="cpu", validate=False,
                              contact_sensors=[ContactSensorSpec("any", ("block", "base")),
                                               ContactSensorSpec("self", ("lid",), with_self=True)])
    try:
        ctrl = torch.zeros(2, b.state_widths().nu)
        b.step(ctrl, 2)  # captures the graph for 2 substeps
        rest_q, rest_v = b.views().qpos.clone(), torch.zeros_like(b.views().qvel)
        mask = torch.tensor([True, False])
        with HostSyncProbe() as probe:
            for _ in range(3):
                b.step(ctrl, 2)
            b.set_state_where(mask, rest_q, rest_v)
        assert probe.syncs == [], probe.syncs
        assert probe.op_count > 0
        cleared = b.views().contacts["any"].in_contact.clone()
        b.step(ctrl, 2)  # a graph replay refills the cleared row
        diag = b.diagnostics()
        assert diag["step_mode"] == "cpu_graph" and diag["graphs_captured_substeps"] == [2]
        assert not cleared[0].any() and cleared[1].all()
        assert b.views().contacts["any"].in_contact.all()
    finally:
        b.close()


def test_the_mjwarp_contact_pass_equals_mujoco_warps_own_contact_sensors_on_tumbling_bodies():
    """The adapter's one pass over live contacts (unisim.adapters.warp_contacts) against MuJoCo
    Warp's ``<contact>`` net-force sensors of the same step, for every filter, while the probe's
    two trees are thrown at each other: sliding, tumbling, the lid hitting the shelf."""
    mjw = pytest.importorskip("mujoco_warp")
    import mujoco
    import warp as wp
    from unisim.adapters.mjwarp import CONTACT_FILTERS
    from unisim.adapters.warp_contacts import contact_tables, publish_contacts
    from unisim.mjcf import add_contact_sensors, contact_sensor_columns, resolve_contact_sensors

    specs = [ContactSensorSpec("any", ("block", "lid", "shelf", "base")),
             ContactSensorSpec("floor", ("block", "base"), with_bodies=("world",)),
             ContactSensorSpec("others", ("block",), with_bodies=("base", "shelf", "lid")),
             ContactSensorSpec("self", ("lid", "shelf"), with_self=True),
             ContactSensorSpec("floor_geom", ("base",), with_geoms=("floor",))]
    spec = mujoco.MjSpec.from_file(str(CONTACT_PROBE_MODEL))
    model = spec.compile()
    plan = resolve_contact_sensors(specs, model, CONTACT_FILTERS, "mjwarp")
    add_contact_sensors(spec, model, plan)
    sensed = spec.compile()
    cols = contact_sensor_columns(sensed, plan)
    n = 6
    gen = torch.Generator().manual_seed(3)
    data = mujoco.MjData(sensed)
    qpos = torch.tensor(data.qpos, dtype=torch.float32).repeat(n, 1)
    qvel = torch.zeros(n, sensed.nv)
    qpos[:, 2] += 0.3 * torch.rand(n, generator=gen)  # the block, lifted a little
    qvel[:, 0] = 4.0 + torch.rand(n, generator=gen)  # thrown at the base, 1 m away
    qvel[:, 2] = 1.0
    qvel[:, 3:6] = 4.0 * torch.rand(n, 3, generator=gen) - 2.0  # tumbling
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(sensed)
        d = mjw.make_data(sensed, nworld=n, nconmax=64, njmax=256)
        wp.to_torch(d.qpos).copy_(qpos)
        wp.to_torch(d.qvel).copy_(qvel)
        tables = contact_tables(sensed, plan, n, int(d.naconmax))
        touched = torch.zeros(plan.rows, dtype=torch.bool)
        for step in range(120):
            mjw.step(m, d)
            if step % 8:
                continue
            publish_contacts(m, d, tables)
            sensor = wp.to_torch(d.sensordata)
            expected = torch.zeros(n, plan.rows, 3)
            for k, target in enumerate(plan.targets):  # MuJoCo orients it as the force the body exerts
                expected[:, target.row] -= sensor[:, cols[k]:cols[k] + 3]
            got = wp.to_torch(tables["force"])
            assert torch.allclose(got, expected, rtol=1e-4, atol=1e-3), f"step {step}: {(got - expected).abs().max()}"
            flags = wp.to_torch(tables["in_contact"])
            assert torch.equal(flags, expected.norm(dim=-1) > torch.tensor(plan.thresholds))
            touched |= (expected.norm(dim=-1) > 1.0).any(0)
    print("rows in contact at some compared step:", touched.tolist())
    for spec, (a, b) in zip(specs, plan.slices, strict=True):
        assert touched[a:b].any(), f"the scenario never puts {spec.name!r} in contact"
