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


def _mat_from_products() -> np.ndarray:
    """Rotation matrix entries as a linear map of the quaternion's products q_i q_j (MuJoCo's
    homogeneous mju_quat2Mat: R00 = ww + xx - yy - zz, R01 = 2 (xy - wz), ...): rows index the
    flattened 4x4 outer product q q^T, columns the flattened 3x3 matrix. A symmetric product
    appears twice in q q^T, so "2 xy" is a 1 on (x, y) and on (y, x)."""
    w, x, y, z = range(4)
    entries = [
        ((w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)), ((x, y, 1), (w, z, -1)), ((x, z, 1), (w, y, 1)),
        ((x, y, 1), (w, z, 1)), ((w, w, 1), (x, x, -1), (y, y, 1), (z, z, -1)), ((y, z, 1), (w, x, -1)),
        ((x, z, 1), (w, y, -1)), ((y, z, 1), (w, x, 1)), ((w, w, 1), (x, x, -1), (y, y, -1), (z, z, 1)),
    ]
    table = np.zeros((4, 4, 9))
    for entry, terms in enumerate(entries):
        for i, j, sign in terms:
            table[i, j, entry] += sign
            if i != j:
                table[j, i, entry] += sign
    return table.reshape(16, 9)


_MAT_FROM_PRODUCTS = _mat_from_products()


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
    rotation, one point velocity per frame), then each kind's values, and writes all columns
    at once: a few ops per kind, whatever the number of sensors of that kind.
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
        keys = list(frames)
        self._frame_body = as_index([k[0] for k in keys])
        frame_pos = np.array([k[1:4] for k in keys], dtype=np.float64).reshape(-1, 3)
        frame_quat = np.array([k[4:8] for k in keys], dtype=np.float64).reshape(-1, 4)
        # Each frame's world orientation and offset from its body are R_b [R_f | p_f], with R_b
        # linear in the body quaternion's products: one (16 x 12) matrix per frame turns those
        # products into both, in one batched product.
        products = np.einsum("fi,fj->fij", frame_quat, frame_quat).reshape(-1, 16)
        frame_rot = (products @ _MAT_FROM_PRODUCTS).reshape(-1, 3, 3)
        offset = np.concatenate([frame_rot, frame_pos[:, :, None]], -1)
        frame_map = np.einsum("mij,fjk->fmik", _MAT_FROM_PRODUCTS.reshape(16, 3, 3), offset)
        self._frame_from_products = torch.tensor(frame_map.reshape(len(keys), 16, 12), dtype=torch.float32,
                                                 device=device)
        self._columns = as_index([c for _, (cols, _) in groups.items() for c in sum(cols, [])])
        self._kinds = []
        for kind, (_, src) in groups.items():
            # A frame kind reading every frame in order needs no gather.
            index = None if kind not in ("jointpos", "jointvel") and src == list(range(len(keys))) else as_index(src)
            # framequat: the body quaternion times a fixed offset, as a (4 x 4) matrix per sensor.
            offset_quat = (torch.tensor(np.stack([_right_product(frame_quat[i]) for i in src]), dtype=torch.float32,
                                        device=device) if kind == "framequat" else None)
            bodies = None if kind in ("jointpos", "jointvel") else self._frame_body[as_index(src)]
            self._kinds.append((kind, index, bodies, offset_quat))

    def compute(self, out: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor, body_pos: torch.Tensor,
                body_quat: torch.Tensor, body_lin_vel: torch.Tensor, body_ang_vel: torch.Tensor) -> None:
        """Write sensordata into ``out`` (N, nsensordata) in place.

        Why it is written this way: it runs after every step and every state write, and on a
        GPU each tensor op is a kernel launch paid on the host, so the frames' rotations come
        from one product of quaternion products and the kinds' values land in ``out`` with one
        write (11 ops for an IMU like the G1's, where per-entry quaternion formulas took 61)."""
        if not self._kinds:
            return
        fb = self._frame_body
        if fb.numel():
            q = torch.index_select(body_quat, 1, fb).transpose(0, 1)  # (F, N, 4)
            products = (q.unsqueeze(-1) * q.unsqueeze(-2)).flatten(-2)  # (F, N, 16)
            frame = torch.bmm(products, self._frame_from_products).unflatten(-1, (3, 4)).transpose(0, 1)
            rot, rel = frame[..., :3], frame[..., 3]  # (N, F, 3, 3) world orientation, (N, F, 3) offset
            omega = torch.index_select(body_ang_vel, 1, fb)
            point_vel = torch.index_select(body_lin_vel, 1, fb) + torch.linalg.cross(omega, rel, dim=-1)
        values = []
        for kind, src, bodies, offset_quat in self._kinds:
            pick = (lambda t: t) if src is None else (lambda t, src=src: t[:, src])
            if kind == "jointpos":
                value = qpos[:, src]
            elif kind == "jointvel":
                value = qvel[:, src]
            elif kind == "framepos":
                value = torch.index_select(body_pos, 1, bodies) + pick(rel)
            elif kind == "framequat":
                value = torch.einsum("nsi,sij->nsj", torch.index_select(body_quat, 1, bodies), offset_quat)
            elif kind in _FRAME_AXIS:
                value = pick(rot)[..., _FRAME_AXIS[kind]]
            elif kind == "frameangvel":
                value = pick(omega)
            elif kind == "framelinvel":
                value = pick(point_vel)
            elif kind == "gyro":  # the angular velocity in the frame: R^T omega
                value = torch.einsum("nsji,nsj->nsi", pick(rot), pick(omega))
            else:  # velocimeter: the frame origin's velocity in the frame
                value = torch.einsum("nsji,nsj->nsi", pick(rot), pick(point_vel))
            values.append(value.flatten(1))
        out[:, self._columns] = values[0] if len(values) == 1 else torch.cat(values, dim=1)


def _right_product(c: np.ndarray) -> np.ndarray:
    """M with q * c == q @ M for wxyz quaternions (the Hamilton product by a fixed right factor)."""
    w, x, y, z = c
    return np.array([[w, x, y, z], [-x, w, -z, y], [-y, z, w, -x], [-z, -y, x, w]])
