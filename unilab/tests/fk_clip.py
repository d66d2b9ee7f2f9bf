"""Test data of the project's G1: a reference clip made here by forward kinematics (the
knees-bent pose with every joint swinging and the base drifting forward and turning), and the
joint order of Isaac Lab's (BeyondMimic's) motion files."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import torch
from unilab.assets import g1_scene_path
from unilab.assets.motion import MotionClip

# The 29 G1 joints in Isaac Lab's articulation order (left/right/waist interleaved level by level),
# the order of joint_pos in BeyondMimic's own motion files: written out, not computed, so that the
# importer's breadth-first order is tested against it. Same width as the model's order.
ISAACLAB_ORDER = (
    "left_hip_pitch_joint", "right_hip_pitch_joint", "waist_yaw_joint", "left_hip_roll_joint",
    "right_hip_roll_joint", "waist_roll_joint", "left_hip_yaw_joint", "right_hip_yaw_joint",
    "waist_pitch_joint", "left_knee_joint", "right_knee_joint", "left_shoulder_pitch_joint",
    "right_shoulder_pitch_joint", "left_ankle_pitch_joint", "right_ankle_pitch_joint",
    "left_shoulder_roll_joint", "right_shoulder_roll_joint", "left_ankle_roll_joint",
    "right_ankle_roll_joint", "left_shoulder_yaw_joint", "right_shoulder_yaw_joint",
    "left_elbow_joint", "right_elbow_joint", "left_wrist_roll_joint", "right_wrist_roll_joint",
    "left_wrist_pitch_joint", "right_wrist_pitch_joint", "left_wrist_yaw_joint", "right_wrist_yaw_joint")


def _ang_vel_w(q0: np.ndarray, q1: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity taking unit quaternions q0 to q1 (wxyz) in dt."""
    out = np.zeros(3)
    mujoco.mju_subQuat(out, q1, q0)  # body-frame rotation vector of q0^-1 q1
    body = out / dt
    world = np.zeros(3)
    mujoco.mju_rotVecQuat(world, body, q0)
    return world


def synthetic_clip(frames: int = 150, fps: float = 50.0, name: str = "fk_sway") -> MotionClip:
    model = mujoco.MjModel.from_xml_path(str(g1_scene_path()))
    data = mujoco.MjData(model)
    key = model.key("knees_bent").id
    joints = [model.actuator_trnid[a, 0] for a in range(model.nu)]
    joint_names = tuple(model.joint(j).name for j in joints)
    qadr = [model.jnt_qposadr[j] for j in joints]
    body_names = tuple(model.body(b).name for b in range(1, model.nbody))
    dt = 1.0 / fps
    qpos, body_pos, body_quat = [], [], []
    for t in range(frames):
        q = model.key_qpos[key].copy()
        s = t * dt
        q[0] += 0.3 * s
        yaw = 0.2 * s
        q[3:7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
        for k, a in enumerate(qadr):
            q[a] += 0.15 * math.sin(2 * math.pi * 0.8 * s + 0.4 * k)
        data.qpos[:] = q
        mujoco.mj_kinematics(model, data)
        qpos.append(q)
        body_pos.append(data.xpos[1:].copy())
        body_quat.append(data.xquat[1:].copy())
    qpos, body_pos, body_quat = np.array(qpos), np.array(body_pos), np.array(body_quat)
    joint_pos = qpos[:, qadr]
    grad = lambda x: np.gradient(x, dt, axis=0)
    ang = np.zeros_like(body_pos)
    for t in range(frames):
        a, b = max(t - 1, 0), min(t + 1, frames - 1)
        for i in range(body_pos.shape[1]):
            ang[t, i] = _ang_vel_w(body_quat[a, i], body_quat[b, i], (b - a) * dt)
    f32 = lambda x: torch.tensor(np.asarray(x), dtype=torch.float32)
    return MotionClip(name=name, fps=fps, joint_names=joint_names, body_names=body_names,
                      joint_pos=f32(joint_pos), joint_vel=f32(grad(joint_pos)), body_pos_w=f32(body_pos),
                      body_quat_w=f32(body_quat), body_lin_vel_w=f32(grad(body_pos)), body_ang_vel_w=f32(ang))
