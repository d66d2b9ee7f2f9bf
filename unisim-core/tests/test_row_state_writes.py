"""Writing the state of some rows: a masked reset ignores the rows it does not write, a written row
steps as a fresh world, and it is published from its own per-env model. Each test fails on one
small, deliberate change to the code it names (recorded beside it) and passes on the code as
written."""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import unisim
from sim_test_models import ARMS_XML
from unisim.conformance.states import random_state

# ---- contract: set_state_where ignores the unselected rows of qpos -----------------------------
# (mutant: the quaternion check applied to every row, not only the masked ones)

def test_a_masked_reset_ignores_zero_quaternions_in_the_rows_it_does_not_write(builtin_model):
    backend = unisim.create_backend("mujoco", model=builtin_model, num_envs=3, nthread=1)
    try:
        inv = backend.inventory()
        backend.set_state(torch.arange(3), *random_state(inv, 3, 1))
        before = backend.views().qpos.clone()
        new_q, new_v = random_state(inv, 1, 2)
        qpos = torch.zeros(3, inv.widths.nq)  # rows 1 and 2: all zeros, a zero base quaternion
        qvel = torch.zeros(3, inv.widths.nv)
        qpos[0], qvel[0] = new_q[0], new_v[0]
        backend.set_state_where(torch.tensor([True, False, False]), qpos, qvel)
        assert torch.allclose(backend.views().qpos[0], new_q[0], atol=1e-6)
        assert torch.equal(backend.views().qpos[1:], before[1:])
    finally:
        backend.close()


# ---- mujoco adapter: set_state restarts the actuator activations with the episode -------------
# (mutant: ``self._state[idx] = 0.0`` dropped, so act and time carry over)

_FILTERED_SLIDER_XML = """<mujoco><option gravity="0 0 0" timestep="0.01"/><worldbody><body name="cart">
<joint name="x" type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
</body></worldbody><actuator><general joint="x" dyntype="filter" dynprm="0.05" gainprm="1"/></actuator>
</mujoco>"""


def test_a_written_row_steps_as_a_fresh_world_from_the_same_state(tmp_path):
    path = tmp_path / "filtered_slider.xml"
    path.write_text(_FILTERED_SLIDER_XML)
    used = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    fresh = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    try:
        for _ in range(5):  # the filter's activation builds up under a held control
            used.step(torch.ones(2, 1), 2)
        zeros = torch.zeros(2, 1)
        used.set_state(torch.arange(2), zeros, zeros)
        fresh.set_state(torch.arange(2), zeros, zeros)
        used.step(torch.zeros(2, 1), 1)
        fresh.step(torch.zeros(2, 1), 1)
        assert torch.equal(fresh.views().qvel, torch.zeros(2, 1))  # no activation, no force
        assert torch.equal(used.views().qvel, fresh.views().qvel)
    finally:
        used.close()
        fresh.close()


# ---- mujoco adapter: a written row is published with its own (per-env) model ------------------
# (mutant: the written rows published with the first n publication models, not their own)



def test_writing_one_row_publishes_it_from_that_rows_moved_centre_of_mass(tmp_path):
    path = tmp_path / "arms.xml"
    path.write_text(ARMS_XML)
    compiled = mujoco.MjModel.from_xml_string(ARMS_XML.replace(
        '<inertial pos="0 0 0"', '<inertial pos="0.2 0 0"'))
    reference = mujoco.MjData(compiled)
    mujoco.mj_forward(compiled, reference)
    backend = unisim.create_backend("mujoco", model=str(path), num_envs=2, nthread=1)
    try:
        unmoved = backend.views().sensordata[0].clone()
        moved = backend.model_field("body_ipos")[:1].clone()
        moved[0, 1] = torch.from_numpy(compiled.body_ipos[1]).float()
        backend.set_model_field("body_ipos", torch.tensor([1]), moved)  # row 1 only
        backend.set_state(torch.tensor([1]), torch.zeros(1, 2), torch.zeros(1, 2))  # row 1 only
        sensed = backend.views().sensordata
        assert np.abs(sensed[1].numpy() - reference.sensordata).max() < 1e-6, (sensed, reference.sensordata)
        assert torch.equal(sensed[0], unmoved)
        assert not torch.allclose(sensed[0], sensed[1])
    finally:
        backend.close()
