"""MJCF sensors computed from link (body-origin) states, for engines that drop ``<sensor>``.

Genesis parses no MJCF sensors (FACTS.md s.3), so its adapter publishes the MuJoCo
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

    Built once per model; ``compute`` is a handful of batched gathers per sensor kind.
    """

    def __init__(self, model: mujoco.MjModel, device: torch.device) -> None:
        self.nsensordata = int(model.nsensordata)
        groups: dict[str, dict[str, list]] = {}
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
            g = groups.setdefault(kind, {"body": [], "pos": [], "quat": [], "col": [], "src": []})
            g["col"].append(range(int(model.sensor_adr[s]), int(model.sensor_adr[s] + model.sensor_dim[s])))
            if kind in ("jointpos", "jointvel"):
                j = int(model.sensor_objid[s])
                g["src"].append(int(model.jnt_qposadr[j] if kind == "jointpos" else model.jnt_dofadr[j]))
            else:
                body, pos, quat = _attachment(model, s)
                g["body"].append(body)
                g["pos"].append(np.asarray(pos, dtype=np.float64))
                g["quat"].append(np.asarray(quat, dtype=np.float64))
        self._groups = []
        for kind, g in groups.items():
            cols = torch.tensor([list(c) for c in g["col"]], dtype=torch.int64, device=device)
            if kind in ("jointpos", "jointvel"):
                src = torch.tensor(g["src"], dtype=torch.int64, device=device)
                self._groups.append((kind, cols, src, None, None))
            else:
                body = torch.tensor(g["body"], dtype=torch.int64, device=device)
                pos = torch.tensor(np.stack(g["pos"]), dtype=torch.float32, device=device)
                quat = torch.tensor(np.stack(g["quat"]), dtype=torch.float32, device=device)
                self._groups.append((kind, cols, body, pos, quat))

    def compute(self, out: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor, body_pos: torch.Tensor,
                body_quat: torch.Tensor, body_lin_vel: torch.Tensor, body_ang_vel: torch.Tensor) -> None:
        """Write sensordata into ``out`` (N, nsensordata) in place."""
        for kind, cols, idx, off_pos, off_quat in self._groups:
            if off_pos is None:
                out[:, cols[:, 0]] = (qpos if kind == "jointpos" else qvel)[:, idx]
                continue
            rot_b = quat_to_mat(body_quat[:, idx])  # (N, k, 3, 3)
            site_rel = torch.einsum("nkij,kj->nki", rot_b, off_pos)  # frame origin minus body origin
            site_quat = quat_mul(body_quat[:, idx], off_quat.expand_as(body_quat[:, idx]))
            rot_s = quat_to_mat(site_quat)
            omega = body_ang_vel[:, idx]
            if kind == "framepos":
                value = body_pos[:, idx] + site_rel
            elif kind == "framequat":
                value = site_quat
            elif kind in _FRAME_AXIS:
                value = rot_s[..., :, _FRAME_AXIS[kind]]
            elif kind in ("gyro", "frameangvel"):
                value = omega if kind == "frameangvel" else torch.einsum("nkji,nkj->nki", rot_s, omega)
            else:  # velocimeter, framelinvel: velocity of the frame point
                point_vel = body_lin_vel[:, idx] + torch.cross(omega, site_rel, dim=-1)
                value = point_vel if kind == "framelinvel" else torch.einsum("nkji,nkj->nki", rot_s, point_vel)
            out[:, cols.reshape(-1)] = value.reshape(value.shape[0], -1)
