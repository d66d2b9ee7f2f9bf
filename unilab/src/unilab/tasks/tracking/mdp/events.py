"""Reset event of the tracking task: every episode starts on its sampled reference frame."""

from __future__ import annotations

import torch

from unilab import math as lm
from unilab.tasks.tracking.mdp.commands import MotionCommand
from unilab.terms.events import clamp_into_columns, uniform
from unilab.terms.rewards import soft_joint_limits

_POSE_AXES = ("x", "y", "z", "roll", "pitch", "yaw")


class reset_from_motion:
    """Writes, for every row, the reference state of the episode's start frame (the command's
    ``state_frame``, one before its target) into the transaction (only the rows starting an
    episode are committed): root pose and velocity, joint positions and velocities, each with
    uniform noise. Joint positions stay inside the soft joint limits. Runs after the command
    drew the new episodes' frames.

    params: command_name; pose_range / velocity_range (axis -> (lo, hi); axes x y z roll
    pitch yaw; velocities in the world frame); joint_position_range (lo, hi) rad;
    soft_factor (fraction of each joint range kept)."""


    def __init__(self, cfg, env) -> None:
        p = cfg.params
        self.command = env.command_manager.term(p["command_name"], "reset_from_motion")
        if not isinstance(self.command, MotionCommand):
            raise ValueError(f"command {p['command_name']!r} is a {type(self.command).__name__}, not a MotionCommand")
        dev = env.device

        def ranges(table: dict, what: str) -> tuple[torch.Tensor, torch.Tensor]:
            unknown = set(table) - set(_POSE_AXES)
            if unknown:
                raise ValueError(f"{what}: unknown axes {sorted(unknown)}; valid: {list(_POSE_AXES)}")
            lo = torch.tensor([table.get(a, (0.0, 0.0))[0] for a in _POSE_AXES], device=dev)
            hi = torch.tensor([table.get(a, (0.0, 0.0))[1] for a in _POSE_AXES], device=dev)
            return lo, hi

        self.pose_lo, pose_hi = ranges(p.get("pose_range", {}), "pose_range")
        self.vel_lo, vel_hi = ranges(p.get("velocity_range", {}), "velocity_range")
        self.pose_width, self.vel_width = pose_hi - self.pose_lo, vel_hi - self.vel_lo
        self.joint_lo, self.joint_hi = p.get("joint_position_range", (0.0, 0.0))
        self.soft_lo, self.soft_hi = soft_joint_limits(env, p.get("soft_factor", 0.9))
        # Every row gets the root and the robot's joints; when those are all of qpos and qvel (no
        # other body in the scene), the env need not refill the rest with its default pose.
        robot = env.robot
        self.fills_reset_state = (
            _columns(robot.root_qpos_adr, 7, robot.joint_qpos_index) == set(range(env.default_qpos.shape[0]))
            and _columns(robot.root_qvel_adr, 6, robot.joint_qvel_index) == set(range(env.default_qvel.shape[0])))

    def __call__(self, env, txn) -> None:
        robot, n = env.robot, txn.reset_qpos.shape[0]
        pos, quat, lin_vel, ang_vel_w, joints, joint_vel = self.command.state_frame(
            "root_pos", "root_quat", "root_lin_vel", "root_ang_vel", "joint_pos", "joint_vel")
        pose = uniform(env, (n, 6), self.pose_lo, self.pose_width)
        vel = uniform(env, (n, 6), self.vel_lo, self.vel_width)
        quat = lm.quat_mul(lm.quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5]), quat)
        a, b = robot.root_qpos_adr, robot.root_qvel_adr
        torch.add(pos, pose[:, :3], out=txn.reset_qpos[:, a:a + 3])  # into the slice: no extra copy
        txn.reset_qpos[:, a + 3:a + 7] = quat
        torch.add(lin_vel, vel[:, :3], out=txn.reset_qvel[:, b:b + 3])
        # The free joint's angular velocity is in the body frame.
        txn.reset_qvel[:, b + 3:b + 6] = lm.quat_apply_inverse(quat, ang_vel_w + vel[:, 3:])
        if (self.joint_lo, self.joint_hi) != (0.0, 0.0):
            joints = joints + uniform(env, joints.shape, self.joint_lo, self.joint_hi - self.joint_lo)
        clamp_into_columns(txn.reset_qpos, robot.joint_qpos_index, joints, self.soft_lo, self.soft_hi)
        txn.reset_qvel[:, robot.joint_qvel_index] = joint_vel


def _columns(root_adr: int, root_width: int, joints: slice | list[int]) -> set[int]:
    joint_cols = range(joints.start, joints.stop) if isinstance(joints, slice) else joints
    return {*range(root_adr, root_adr + root_width), *joint_cols}
