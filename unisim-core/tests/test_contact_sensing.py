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
    """The adapters append MuJoCo contact sensors to the physics model; the model's own
    sensors keep their columns and values, and the inventory lists only them."""
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
