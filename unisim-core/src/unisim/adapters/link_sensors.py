"""MJCF sensors computed from link (body-origin) states, for engines that drop ``<sensor>``.

Genesis parses no MJCF ``<sensor>`` elements (it drops them without a warning), so its adapter publishes the MuJoCo
sensordata layout by computing each declared kind from what it does publish: body origin
pose, body origin world velocity, qpos and qvel. The attachment offset (site, geom, body
inertial frame) comes from the compiled MjModel. Kinds with inputs we do not have
(accelerations, forces, contacts, reference frames, cutoffs) are refused at construction.
Pure torch, so it is tested against MuJoCo C directly (tests/test_genesis_adapter.py).
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from unisim.errors import ContractViolation
from unisim.mjcf import sensor_kind

SENSOR_KINDS = frozenset({
    "gyro", "velocimeter", "framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis",
    "framelinvel", "frameangvel", "jointpos", "jointvel",
})
_FRAME_AXIS = {"framexaxis": 0, "frameyaxis": 1, "framezaxis": 2}


def quat_to_mat(q: torch.Tensor) -> torch.Tensor:
    """(..., 4) wxyz unit quaternions -> (..., 3, 3) rotation matrices."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(*q.shape[:-1], 3, 3)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack([
        aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], dim=-1)


def _attachment(model: mujoco.MjModel, s: int) -> tuple[int, np.ndarray, np.ndarray]:
    """(body id, offset pos, offset quat) of the frame a sensor reads, relative to the body."""
    objtype, objid = int(model.sensor_objtype[s]), int(model.sensor_objid[s])
    if objtype == mujoco.mjtObj.mjOBJ_SITE:
        return int(model.site_bodyid[objid]), model.site_pos[objid], model.site_quat[objid]
    if objtype == mujoco.mjtObj.mjOBJ_GEOM:
        return int(model.geom_bodyid[objid]), model.geom_pos[objid], model.geom_quat[objid]
    if objtype == mujoco.mjtObj.mjOBJ_BODY:  # MuJoCo's "body" frame sensors read the inertial frame
        return objid, model.body_ipos[objid], model.body_iquat[objid]
    if objtype == mujoco.mjtObj.mjOBJ_XBODY:
        return objid, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    raise ContractViolation(
        f"model: sensor {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, s)!r} is attached to a "
        f"{mujoco.mjtObj(objtype).name}, which link-state sensors do not support (site, geom, body, xbody)")


class LinkStateSensors:
    """Computes MuJoCo sensordata (N, nsensordata) from body-origin states.

    Built once per model. ``compute`` evaluates every attachment frame in one batch (one
    rotation, one point velocity per frame) and then scatters each kind's columns, so the
    cost is a fixed ~20 tensor ops whatever the number of sensors (it runs after every
    step: on a GPU each op is a kernel launch).
    """

    def __init__(self, model: mujoco.MjModel, device: torch.device) -> None:
        self.nsensordata = int(model.nsensordata)
        frames: dict[tuple, int] = {}  # (body, pos, quat) -> frame index, shared by sensors
        groups: dict[str, tuple[list, list]] = {}  # kind -> (column ranges, frame or state index)
        for s in range(model.nsensor):
            kind = sensor_kind(model, s)
            name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, s)
            if kind not in SENSOR_KINDS:
                raise ContractViolation(
                    f"model: sensor {name!r} of kind {kind!r} is not published by link-state sensors; "
                    f"supported kinds: {sorted(SENSOR_KINDS)}")
            if int(model.sensor_reftype[s]) != int(mujoco.mjtObj.mjOBJ_UNKNOWN) or float(model.sensor_cutoff[s]) > 0:
                raise ContractViolation(
                    f"model: sensor {name!r} uses a reference frame or a cutoff, which link-state sensors "
                    "do not support; remove reftype/cutoff or use the mujoco or mjwarp backend")
            cols, src = groups.setdefault(kind, ([], []))
            cols.append(list(range(int(model.sensor_adr[s]), int(model.sensor_adr[s] + model.sensor_dim[s]))))
            if kind in ("jointpos", "jointvel"):
                j = int(model.sensor_objid[s])
                src.append(int(model.jnt_qposadr[j] if kind == "jointpos" else model.jnt_dofadr[j]))
            else:
                body, pos, quat = _attachment(model, s)
                key = (body, *np.round(np.asarray(pos, dtype=np.float64), 12), *np.asarray(quat, dtype=np.float64))
                src.append(frames.setdefault(key, len(frames)))
        as_index = lambda xs: torch.tensor(xs, dtype=torch.int64, device=device)
        self._kinds = [(kind, as_index(cols).reshape(-1), as_index(src)) for kind, (cols, src) in groups.items()]
        keys = list(frames)
        self._frame_body = as_index([k[0] for k in keys])
        self._frame_pos = torch.tensor([k[1:4] for k in keys], dtype=torch.float32, device=device).reshape(-1, 3)
        self._frame_quat = torch.tensor([k[4:8] for k in keys], dtype=torch.float32, device=device).reshape(-1, 4)
        self._frame_rot = quat_to_mat(self._frame_quat)

    def compute(self, out: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor, body_pos: torch.Tensor,
                body_quat: torch.Tensor, body_lin_vel: torch.Tensor, body_ang_vel: torch.Tensor) -> None:
        """Write sensordata into ``out`` (N, nsensordata) in place."""
        n = out.shape[0]
        if self._frame_body.numel():
            fb = self._frame_body
            rot_b = quat_to_mat(body_quat[:, fb])  # (N, F, 3, 3)
            rel = (rot_b @ self._frame_pos.unsqueeze(-1)).squeeze(-1)  # frame origin - body origin, world
            rot = rot_b @ self._frame_rot  # frame orientation in world
            omega = body_ang_vel[:, fb]
            point_vel = body_lin_vel[:, fb] + torch.cross(omega, rel, dim=-1)
            rot_t = rot.transpose(-1, -2)
        for kind, cols, src in self._kinds:
            if kind == "jointpos":
                value = qpos[:, src]
            elif kind == "jointvel":
                value = qvel[:, src]
            elif kind == "framepos":
                value = body_pos[:, fb[src]] + rel[:, src]
            elif kind == "framequat":
                body_q = body_quat[:, fb[src]]
                value = quat_mul(body_q, self._frame_quat[src].expand_as(body_q))
            elif kind in _FRAME_AXIS:
                value = rot[:, src, :, _FRAME_AXIS[kind]]
            elif kind == "frameangvel":
                value = omega[:, src]
            elif kind == "framelinvel":
                value = point_vel[:, src]
            elif kind == "gyro":
                value = (rot_t[:, src] @ omega[:, src].unsqueeze(-1)).squeeze(-1)
            else:  # velocimeter
                value = (rot_t[:, src] @ point_vel[:, src].unsqueeze(-1)).squeeze(-1)
            out[:, cols] = value.reshape(n, -1)
