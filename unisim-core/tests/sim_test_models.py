"""Models and states the adapter tests share (imported by name from the tests folder)."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import torch
from unisim.conformance.states import random_state
from unisim.mjcf import build_inventory


def with_sensors(model_path: str, sensors_xml: str) -> str:
    """The MJCF at ``model_path`` with its ``<sensor>`` block replaced by ``sensors_xml``."""
    head, _, rest = Path(model_path).read_text().partition("<sensor>")
    _, _, tail = rest.partition("</sensor>")
    return head + sensors_xml + tail


def with_tilted_site(xml: str) -> str:
    """``xml`` plus a site "tilted" next to "imu", offset and rotated, so sensors on it
    exercise a site frame with orientation."""
    return xml.replace('<site name="imu"',
                       '<site name="tilted" pos="0.05 -0.03 0.02" euler="0.3 -0.5 1.1"/>\n      <site name="imu"', 1)


def random_model_state(model: mujoco.MjModel, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The conformance suite's random valid state, for a compiled model."""
    return random_state(build_inventory(model), n, seed)


def mj_reference(model: mujoco.MjModel, qpos: torch.Tensor, qvel: torch.Tensor) -> dict[str, np.ndarray]:
    """mj_forward of each row: body poses, body-origin velocities (mjOBJ_XBODY), sensordata."""
    data = mujoco.MjData(model)
    out: dict[str, list] = {"body_pos_w": [], "body_quat_w": [], "body_lin_vel_w": [], "body_ang_vel_w": [],
                            "sensordata": []}
    res = np.zeros(6)
    for q, v in zip(qpos.double().numpy(), qvel.double().numpy(), strict=True):
        data.qpos[:], data.qvel[:] = q, v
        mujoco.mj_forward(model, data)
        lin, ang = [], []
        for b in range(model.nbody):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, b, res, 0)
            ang.append(res[:3].copy())
            lin.append(res[3:].copy())
        for key, value in (("body_pos_w", data.xpos), ("body_quat_w", data.xquat), ("body_lin_vel_w", lin),
                           ("body_ang_vel_w", ang), ("sensordata", data.sensordata)):
            out[key].append(np.array(value, dtype=np.float64))
    return {k: np.stack(v) for k, v in out.items()}


VIEW_ORDER = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w", "sensordata")


def mj_reference_tensors(model: mujoco.MjModel, qpos: torch.Tensor, qvel: torch.Tensor) -> list[torch.Tensor]:
    """``mj_reference`` as float32 tensors in VIEW_ORDER."""
    ref = mj_reference(model, qpos, qvel)
    return [torch.tensor(ref[key], dtype=torch.float32) for key in VIEW_ORDER]


# Two hinged arms. "centred" has its centre of mass at its origin, "offset" a site placed exactly
# at its (rotated) centre of mass: MuJoCo's compiler marks both as sharing that frame.
ARMS_XML = """<mujoco><worldbody>
<body name="centred" pos="0 0 1"><joint name="a" type="hinge" axis="0 1 0"/>
<inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/></body>
<body name="offset" pos="1 0 1"><joint name="b" type="hinge" axis="0 1 0"/>
<inertial pos="0.1 0 0" quat="0.7071068 0.7071068 0 0" mass="1" diaginertia="0.01 0.02 0.03"/>
<site name="at_com" pos="0.1 0 0" quat="0.7071068 0.7071068 0 0"/></body>
</worldbody><actuator><motor joint="a"/><motor joint="b"/></actuator>
<sensor><framepos objtype="body" objname="centred"/><framepos objtype="site" objname="at_com"/></sensor>
</mujoco>"""
