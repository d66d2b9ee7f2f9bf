"""Rotation helpers, finite differences and forward kinematics of the project's G1 model.

NumPy float64 throughout (leaf I/O); quaternions wxyz. Conventions shared by the importer
and the checker, so an imported clip is consistent with what ``check`` measures:

- joint and root linear velocities are central differences of positions (one-sided at the
  two ends), the way the pinned clips were made (their joint velocities match this to float
  error);
- angular velocities are SO(3) differences in the world frame: the rotation vector of
  ``q[t+1] q[t-1]^-1`` over ``2 dt`` (``q[1] q[0]^-1`` over ``dt`` at the ends);
- body poses are ``mj_kinematics`` of the model at (root pose, joint positions); body
  velocities are ``mj_objectVelocity`` of each body frame (``mjOBJ_XBODY``, world
  orientation) at the joint velocities, so they are exactly the rigid-body velocities the
  simulator reports for that state, not finite differences of body positions.
"""

from __future__ import annotations

from functools import lru_cache

import mujoco
import numpy as np


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_rotvec(q: np.ndarray) -> np.ndarray:
    """Rotation vector (axis * angle, angle in [0, pi]) of unit quaternions."""
    q = np.where(q[..., :1] < 0, -q, q)
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(s, q[..., :1])
    # Near identity angle/s -> 2; the guarded division keeps that limit without a warning.
    scale = np.where(s > 1e-12, angle / np.maximum(s, 1e-12), 2.0)
    return v * scale


def quat_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angle (rad) between quaternions, sign-insensitive: ``2 atan2(|v|, |w|)`` of ``a^-1 b``,
    accurate near 0 (``2 arccos |a.b|`` loses it: float32 rounding of equal rotations reads 6e-4
    rad) and independent of the norms."""
    d = quat_mul(quat_conj(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(d[..., 1:], axis=-1), np.abs(d[..., 0]))


def quat_slerp(a: np.ndarray, b: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Shortest-path slerp between rows of unit quaternions ``a`` and ``b`` at ``alpha`` (N,)."""
    dot = np.sum(a * b, axis=-1)
    b = np.where(dot[:, None] < 0, -b, b)
    dot = np.abs(dot)
    theta = np.arccos(np.clip(dot, -1.0, 1.0))
    sin = np.sin(theta)
    near = sin < 1e-8  # (almost) equal rotations: lerp is exact enough and avoids 0/0
    safe = np.where(near, 1.0, sin)
    wa = np.where(near, 1.0 - alpha, np.sin((1.0 - alpha) * theta) / safe)
    wb = np.where(near, alpha, np.sin(alpha * theta) / safe)
    q = wa[:, None] * a + wb[:, None] * b
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def central_difference(x: np.ndarray, dt: float) -> np.ndarray:
    """d/dt along axis 0: central inside, one-sided at the two ends."""
    return np.gradient(x, dt, axis=0)


def angular_velocity(q: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity (T, ..., 3) of a quaternion track (T, ..., 4) by SO(3) differences."""
    w = np.empty(q.shape[:-1] + (3,))
    w[1:-1] = quat_to_rotvec(quat_mul(q[2:], quat_conj(q[:-2]))) / (2.0 * dt)
    w[0] = quat_to_rotvec(quat_mul(q[1], quat_conj(q[0]))) / dt
    w[-1] = quat_to_rotvec(quat_mul(q[-1], quat_conj(q[-2]))) / dt
    return w


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


@lru_cache(maxsize=1)
def g1_model() -> mujoco.MjModel:
    """The project's G1 model (mesh-free scene): the one clips are expressed in."""
    from unilab.assets.g1_scene import g1_scene_path

    return mujoco.MjModel.from_xml_path(str(g1_scene_path()))


def model_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """Hinge joint names in qpos order (the free joint excluded)."""
    return tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)
                 if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE)


def model_body_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """Body names in MuJoCo order without the world body."""
    return tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(1, model.nbody))


def free_joint_name(model: mujoco.MjModel) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, 0)


def breadth_first_bodies(model: mujoco.MjModel) -> tuple[int, ...]:
    """Body ids (the world excluded) breadth-first over the kinematic tree, children in MuJoCo
    order: the order Isaac Lab lists an articulation's bodies and joints in (BeyondMimic's motion
    files). MuJoCo's own order, the model's, is depth-first (mjlab's files)."""
    children: dict[int, list[int]] = {b: [] for b in range(model.nbody)}
    for b in range(1, model.nbody):
        children[int(model.body_parentid[b])].append(b)
    order, queue = [], list(children[0])
    while queue:
        b = queue.pop(0)
        order.append(b)
        queue.extend(children[b])
    return tuple(order)


def breadth_first_body_names(model: mujoco.MjModel) -> tuple[str, ...]:
    return tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in breadth_first_bodies(model))


def breadth_first_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """Hinge joint names in the breadth-first body order (see ``breadth_first_bodies``)."""
    return tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for b in breadth_first_bodies(model)
                 for j in range(model.body_jntadr[b], model.body_jntadr[b] + model.body_jntnum[b])
                 if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE)


def hinge_ranges(model: mujoco.MjModel) -> np.ndarray:
    """(J, 2) joint ranges of the hinges in qpos order (the model limits every G1 hinge)."""
    return np.array(model.jnt_range[1:], dtype=np.float64)


def forward_kinematics(root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                       root_lin_vel: np.ndarray | None = None, root_ang_vel: np.ndarray | None = None,
                       joint_vel: np.ndarray | None = None,
                       model: mujoco.MjModel | None = None) -> dict[str, np.ndarray]:
    """World body states (T, B, ...) of the model along a trajectory of its free-joint + hinge state.

    ``root_ang_vel`` is world-frame (the free joint's qvel takes it in the root frame; converted
    here). Velocities are returned only when all three velocity arguments are given.
    """
    model = g1_model() if model is None else model
    data = mujoco.MjData(model)
    t, nb = joint_pos.shape[0], model.nbody - 1
    with_vel = root_lin_vel is not None and root_ang_vel is not None and joint_vel is not None
    pos = np.empty((t, nb, 3))
    quat = np.empty((t, nb, 4))
    lin = np.empty((t, nb, 3)) if with_vel else None
    ang = np.empty((t, nb, 3)) if with_vel else None
    if with_vel:
        local_ang = np.einsum("tji,tj->ti", quat_to_mat(root_quat), root_ang_vel)  # R^T w
    res = np.empty(6)
    for i in range(t):
        data.qpos[:3] = root_pos[i]
        data.qpos[3:7] = root_quat[i]
        data.qpos[7:] = joint_pos[i]
        if not with_vel:
            mujoco.mj_kinematics(model, data)
        else:
            data.qvel[:3] = root_lin_vel[i]
            data.qvel[3:6] = local_ang[i]
            data.qvel[6:] = joint_vel[i]
            mujoco.mj_kinematics(model, data)
            mujoco.mj_comPos(model, data)
            mujoco.mj_comVel(model, data)
            for b in range(1, model.nbody):
                mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, b, res, 0)
                ang[i, b - 1] = res[:3]
                lin[i, b - 1] = res[3:]
        pos[i] = data.xpos[1:]
        quat[i] = data.xquat[1:]
    out = {"body_pos_w": pos, "body_quat_w": quat}
    if with_vel:
        out["body_lin_vel_w"] = lin
        out["body_ang_vel_w"] = ang
    return out
