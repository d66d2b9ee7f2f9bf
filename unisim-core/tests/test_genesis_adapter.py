"""genesis adapter behaviour beyond the conformance suite (Genesis CPU, one build per module).

The link-state sensor tests need no Genesis at all: they feed MuJoCo C's own body states
into ``LinkStateSensors`` and compare with MuJoCo's sensordata.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import pytest
import torch
import unisim
from sim_test_models import mj_reference_tensors, random_model_state, with_sensors, with_tilted_site
from unisim import ContractViolation, DataPlane, Feature, ResetPublication
from unisim.adapters import link_sensors
from unisim.adapters.link_sensors import LinkStateSensors
from unisim.host_sync import HostSyncProbe
from unisim.mjcf import sensor_kind

N = 2

# Every kind link-state sensors declare, on sites, geoms, the inertial (body) and the body
# (xbody) frame, plus a rotated site so offsets with orientation are exercised.
LINK_SENSORS = """
  <sensor>
    <gyro site="imu"/> <velocimeter site="imu"/> <gyro site="tilted"/> <velocimeter site="tilted"/>
    <jointpos joint="left_knee"/> <jointvel joint="left_hip"/>
    <framepos objtype="site" objname="tilted"/> <framequat objtype="site" objname="tilted"/>
    <framequat objtype="body" objname="left_leg"/> <framexaxis objtype="geom" objname="left_foot_geom"/>
    <frameyaxis objtype="xbody" objname="left_foot"/> <framezaxis objtype="site" objname="imu"/>
    <framelinvel objtype="site" objname="tilted"/> <frameangvel objtype="body" objname="left_foot"/>
  </sensor>"""


def link_sensor_model(builtin: str) -> str:
    return with_tilted_site(with_sensors(builtin, LINK_SENSORS))


# ---- link-state sensors (no Genesis needed) --------------------------------------------
def test_link_state_sensors_match_mujoco_for_every_declared_kind(builtin_model):
    model = mujoco.MjModel.from_xml_string(link_sensor_model(builtin_model))
    kinds = {sensor_kind(model, s) for s in range(model.nsensor)}
    assert kinds == link_sensors.SENSOR_KINDS, "the pinned model must cover every declared kind"
    qpos, qvel = random_model_state(model, 5, 0)
    pos, quat, lin, ang, want = mj_reference_tensors(model, qpos, qvel)
    out = torch.full((5, model.nsensordata), float("nan"))
    LinkStateSensors(model, torch.device("cpu")).compute(out, qpos, qvel, pos, quat, lin, ang)
    assert (out - want).abs().max() < 1e-5


# Two frames (imu, then tilted): gyro and framequat read both in order (no gather), velocimeter
# both in the other order, framepos and framezaxis one of them.
IN_ORDER_SENSORS = """
  <sensor>
    <gyro site="imu"/> <gyro site="tilted"/> <velocimeter site="tilted"/> <velocimeter site="imu"/>
    <framequat objtype="site" objname="imu"/> <framequat objtype="site" objname="tilted"/>
    <framepos objtype="site" objname="tilted"/> <framezaxis objtype="site" objname="imu"/>
  </sensor>"""


def test_link_state_sensors_match_mujoco_when_kinds_read_every_frame_in_order(builtin_model):
    """Kinds that read all frames in order skip their gather; the values must not change."""
    model = mujoco.MjModel.from_xml_string(with_tilted_site(with_sensors(builtin_model, IN_ORDER_SENSORS)))
    qpos, qvel = random_model_state(model, 5, 1)
    pos, quat, lin, ang, want = mj_reference_tensors(model, qpos, qvel)
    out = torch.full((5, model.nsensordata), float("nan"))
    LinkStateSensors(model, torch.device("cpu")).compute(out, qpos, qvel, pos, quat, lin, ang)
    assert (out - want).abs().max() < 1e-5


def test_link_state_sensors_of_an_imu_take_a_few_ops(builtin_model):
    """Why the sensors are written as batched products: they run after every step and state
    write, and on a GPU every op is a launch paid on the host. An IMU like the G1's (gyro,
    velocimeter and z-axis of one site) took 61 ops with per-entry quaternion formulas."""
    imu = '<sensor><gyro site="imu"/> <velocimeter site="imu"/> <framezaxis objtype="site" objname="imu"/></sensor>'
    model = mujoco.MjModel.from_xml_string(with_sensors(builtin_model, imu))
    qpos, qvel = random_model_state(model, 4, 2)
    pos, quat, lin, ang, want = mj_reference_tensors(model, qpos, qvel)
    sensors, out = LinkStateSensors(model, torch.device("cpu")), torch.zeros(4, model.nsensordata)
    with HostSyncProbe() as probe:
        sensors.compute(out, qpos, qvel, pos, quat, lin, ang)
    assert probe.kernel_op_count <= 15 and not probe.syncs
    assert (out - want).abs().max() < 1e-5


@pytest.mark.parametrize("sensor, match", [
    ('<accelerometer site="imu"/>', "accelerometer"),
    ('<subtreeangmom body="torso"/>', "subtreeangmom"),
    ('<framepos objtype="site" objname="imu" reftype="body" refname="left_leg"/>', "reference frame"),
    ('<gyro site="imu" cutoff="3"/>', "cutoff"),
])
def test_sensors_link_states_cannot_give_are_refused_before_building(builtin_model, sensor, match):
    xml = Path(builtin_model).read_text().replace("<sensor>", "<sensor>" + sensor)
    with pytest.raises(ContractViolation, match=match):
        unisim.create_backend("genesis", model=xml, num_envs=1, device="cpu")


def test_actuators_other_than_position_servos_are_refused(builtin_model):
    xml = Path(builtin_model).read_text().replace('<position name="right_hip" joint="right_hip" kp="40" kv="2"/>',
                                             '<motor name="right_hip" joint="right_hip" gear="20"/>')
    with pytest.raises(ContractViolation, match="right_hip"):
        unisim.create_backend("genesis", model=xml, num_envs=1, device="cpu")


def test_unknown_option_is_refused(builtin_model):
    with pytest.raises(ContractViolation, match="unknown genesis option"):
        unisim.create_backend("genesis", model=builtin_model, num_envs=1, device="cpu", nconmax=3)


# ---- a built backend (one Genesis build for the module) ------------------------------
@pytest.fixture(scope="module")
def model_xml(builtin_model) -> str:
    return link_sensor_model(builtin_model)


@pytest.fixture(scope="module")
def backend(model_xml):
    pytest.importorskip("genesis")
    # An XML string on purpose: Genesis reads files only, the adapter bridges that.
    b = unisim.create_backend("genesis", model=model_xml, num_envs=N, device="cpu")
    yield b
    b.close()


def test_declares_a_device_plane_with_immediate_publication(backend):
    caps = backend.capabilities
    assert caps.data_plane is DataPlane.DEVICE
    assert caps.selected_reset_publication is ResetPublication.IMMEDIATE
    assert not caps.has(Feature.GRAPH_CAPTURE) and caps.sensor_kinds == link_sensors.SENSOR_KINDS


def test_construction_publishes_the_model_rest_state_in_mujoco_layout(backend, model_xml):
    model = mujoco.MjModel.from_xml_string(model_xml)
    qpos0 = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    pos, quat, *_ = mj_reference_tensors(model, qpos0, torch.zeros(N, model.nv))
    views = backend.views()
    assert torch.allclose(views.qpos, qpos0, atol=1e-6)
    assert torch.allclose(views.body_pos_w, pos, atol=1e-5) and torch.allclose(views.body_quat_w, quat, atol=1e-5)


def test_set_state_publishes_poses_velocities_and_sensors_without_a_step(backend, model_xml):
    model = mujoco.MjModel.from_xml_string(model_xml)
    qpos, qvel = random_model_state(model, 1, 1)
    steps = backend.diagnostics()["physics_steps"]
    backend.set_state(torch.tensor([1]), qpos, qvel)
    assert backend.diagnostics()["physics_steps"] == steps
    pos, quat, lin, ang, sensors = mj_reference_tensors(model, qpos, qvel)
    v = backend.views()
    for name, want in (("qpos", qpos), ("qvel", qvel), ("body_pos_w", pos), ("body_lin_vel_w", lin),
                       ("body_ang_vel_w", ang), ("sensordata", sensors)):
        err = (getattr(v, name)[1:] - want).abs().max().item()
        assert err < 1e-4, f"{name} differs from mj_forward by {err}"
    got_quat = v.body_quat_w[1:]  # q and -q are one rotation
    assert torch.minimum((got_quat - quat).abs().amax(-1), (got_quat + quat).abs().amax(-1)).max() < 1e-4


def test_set_state_where_writes_the_masked_rows_keeps_the_others_and_reads_nothing_back(backend, model_xml):
    from unisim.host_sync import HostSyncProbe

    model = mujoco.MjModel.from_xml_string(model_xml)
    qpos, qvel = random_model_state(model, N, 3)
    backend.set_state(torch.arange(N), qpos, qvel)
    before = {name: getattr(backend.views(), name).clone() for name in ("qpos", "qvel", "body_pos_w", "sensordata")}
    new_qpos, new_qvel = random_model_state(model, N, 4)
    mask = torch.tensor([False, True])
    backend.validate = False  # its finiteness check is the one read-back validation costs
    try:
        with HostSyncProbe() as probe:
            backend.set_state_where(mask, new_qpos, new_qvel)
    finally:
        backend.validate = True
    assert probe.syncs == []
    pos, _, lin, _, sensors = mj_reference_tensors(model, new_qpos[1:], new_qvel[1:])
    v = backend.views()
    for name, want in (("qpos", new_qpos[1:]), ("qvel", new_qvel[1:]), ("body_pos_w", pos),
                       ("body_lin_vel_w", lin), ("sensordata", sensors)):
        assert (getattr(v, name)[1:] - want).abs().max() < 1e-4, name
    for name, was in before.items():
        assert torch.equal(getattr(v, name)[0], was[0]), f"{name} of the unmasked row changed"


def test_ctrl_drives_the_position_servos(backend, model_xml):
    # Genesis applies no actuation unless control_dofs_position is called each step; two
    # rows from one state with opposite targets must move apart. (MuJoCo C moves this hip
    # 0.037 rad in these 0.1 s: a heavy leg on a light floating torso; Genesis 0.024.)
    model = mujoco.MjModel.from_xml_string(model_xml)
    qpos = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    qpos[:, 2] = 1.5  # in the air: only the servos move the legs
    backend.set_state(torch.arange(N), qpos, torch.zeros(N, model.nv))
    hip = backend.inventory().joint("left_hip").qpos_adr
    ctrl = torch.zeros(N, 3)
    ctrl[0, 0], ctrl[1, 0] = 0.6, -0.6
    for _ in range(10):
        backend.step(ctrl, 2)
    q = backend.views().qpos[:, hip]
    assert q[0] > 0.01 and q[1] < -0.01, f"left_hip did not follow its targets: {q.tolist()}"


def test_views_are_the_same_tensors_for_the_backend_life(backend):
    first = backend.views()
    ptr = first.sensordata.data_ptr()
    backend.step(torch.zeros(N, 3), 1)
    assert backend.views() is first and first.sensordata.data_ptr() == ptr


def test_genesis_keeps_its_first_device_for_the_process(backend):
    from unisim.adapters.genesis_runtime import genesis_backend_for

    with pytest.raises(ContractViolation, match="already initialised on cpu"):
        genesis_backend_for(torch.device("cuda", 0))


# Actuators listed out of dof order, and actuated dofs with a gap: each servo must still drive
# its own joint. The targets reach Genesis as one dofs range where the actuated dofs form a run
# (a tensor index makes Genesis write constants by advanced indexing: a host sync each on CUDA).
ACTUATORS_IN_ORDER = """    <position name="left_hip" joint="left_hip" kp="40" kv="2"/>
    <position name="left_knee" joint="left_knee" kp="40" kv="2"/>
    <position name="right_hip" joint="right_hip" kp="40" kv="2"/>"""
ACTUATOR_ORDERS = {
    "reversed": ["right_hip", "left_knee", "left_hip"],
    "without_the_knee": ["left_hip", "right_hip"],
}


@pytest.mark.parametrize("order", ACTUATOR_ORDERS)
def test_each_servo_drives_its_own_joint_whatever_the_actuator_order(backend, model_xml, order, monkeypatch):
    from genesis.engine.entities.rigid_entity import RigidEntity

    names = ACTUATOR_ORDERS[order]
    lines = {line.split('"')[1]: line for line in ACTUATORS_IN_ORDER.splitlines()}
    assert ACTUATORS_IN_ORDER in model_xml
    other = unisim.create_backend("genesis", num_envs=N, device="cpu",
                                  model=model_xml.replace(ACTUATORS_IN_ORDER, "\n".join(lines[n] for n in names)))
    dofs_given = []
    control = RigidEntity.control_dofs_position
    monkeypatch.setattr(RigidEntity, "control_dofs_position",
                        lambda self, position, dofs_idx_local=None, envs_idx=None: (
                            dofs_given.append(dofs_idx_local), control(self, position, dofs_idx_local, envs_idx)))
    model = mujoco.MjModel.from_xml_string(model_xml)
    qpos = torch.tensor(model.qpos0, dtype=torch.float32).repeat(N, 1)
    qpos[:, 2] = 1.5  # in the air: only the servos move the legs
    targets = {"left_hip": torch.tensor([0.6, -0.6]), "left_knee": torch.tensor([0.8, 0.2]),
               "right_hip": torch.tensor([-0.4, 0.5])}
    try:
        for b, actuated in ((backend, list(lines)), (other, names)):
            b.set_state(torch.arange(N), qpos, torch.zeros(N, model.nv))
            ctrl = torch.stack([targets[name] for name in actuated], dim=-1)
            for _ in range(10):
                b.step(ctrl, 2)
        for name in names:
            adr = other.inventory().joint(name).qpos_adr
            moved = other.views().qpos[:, adr] - qpos[:, adr]
            assert (moved * targets[name].sign() > 0.01).all(), f"{name} did not follow its targets"
        if order == "reversed":  # the same servos as the model in order: the same motion
            torch.testing.assert_close(other.views().qpos, backend.views().qpos, rtol=0, atol=1e-6)
    finally:
        other.close()
    ranges = [isinstance(dofs, range) for dofs in dofs_given]
    assert ranges == [True] * 10 + [order == "reversed"] * 10


# The views and contacts are read from Genesis's zero-copy state buffers (the tensors its getters
# clone), not through get_qpos/get_links_*/get_contacts: the same values bit for bit, checked
# against a backend made to use the getters, through steps, masked resets and row resets, on the
# sensor model and on the contact probe thrown about (contacts of every declared filter).
def test_zero_copy_reads_equal_genesis_getters_bit_for_bit(model_xml, monkeypatch):
    from unisim import ContactSensorSpec
    from unisim.adapters import genesis as adapter
    from unisim.conformance import CONTACT_PROBE_MODEL
    from unisim.conformance.states import random_state

    pytest.importorskip("genesis")
    probe = [ContactSensorSpec("any", ("block", "lid", "base")),
             ContactSensorSpec("floor", ("block", "lid", "base"), with_bodies=("world",)),
             ContactSensorSpec("self", ("lid", "shelf", "base"), with_self=True)]
    n, seen = 4, {}
    for model, specs in ((model_xml, ()), (str(CONTACT_PROBE_MODEL), probe)):
        fast = unisim.create_backend("genesis", model=model, num_envs=n, device="cpu", contact_sensors=specs)
        with monkeypatch.context() as m:
            m.setattr(adapter, "state_views", lambda scene: None)
            m.setattr(adapter, "contact_views", lambda collider: None)
            slow = unisim.create_backend("genesis", model=model, num_envs=n, device="cpu", contact_sensors=specs)
        try:
            reads = lambda key: (fast.diagnostics()[key], slow.diagnostics()[key])
            assert reads("state_reads") == ("zero-copy views", "getters")
            if specs:
                assert reads("contact_reads") == ("zero-copy views", "get_contacts")

            def same(when):
                a, b = fast.views(), slow.views()
                for name in ("qpos", "qvel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w",
                             "sensordata"):
                    assert torch.equal(getattr(a, name), getattr(b, name)), f"{name} {when}"
                for key in a.contacts:
                    assert torch.equal(a.contacts[key].force_w, b.contacts[key].force_w), f"{key} {when}"
                    assert torch.equal(a.contacts[key].in_contact, b.contacts[key].in_contact), f"{key} {when}"
                    seen[key] = seen.get(key, False) or bool(a.contacts[key].in_contact.any())

            same("after the build")
            inv, gen = fast.inventory(), torch.Generator().manual_seed(0)
            qpos, qvel = random_state(inv, n, 5)
            qvel = 4.0 * qvel  # rows 2, 3 thrown: sliding, tumbling, hitting each other
            qpos[:2], qvel[:2] = fast.views().qpos[:2], 0.0  # rows 0, 1 from the model's pose: settling
            for b in (fast, slow):
                b.set_state(torch.arange(n), qpos, qvel)
            same("after set_state")
            for k in range(40):
                ctrl = torch.rand(n, inv.widths.nu, generator=gen) - 0.5
                for b in (fast, slow):
                    b.step(ctrl, 4)
                same(f"after step {k}")
                if k % 10 == 9:
                    mask = torch.rand(n, generator=gen) < 0.5
                    for b in (fast, slow):
                        b.set_state_where(mask, qpos, qvel)
                    same(f"after set_state_where {k}")
        finally:
            fast.close()
            slow.close()
    assert seen == {"any": True, "floor": True, "self": True}, f"a filter never saw a contact: {seen}"
