"""Rewards of the tracking task, fused: every component in one pass over shared errors.

The six tracking kernels are exp(-error / std^2) (BeyondMimic's set): the anchor's global
position and orientation against the clip, the tracked bodies' positions and orientations
against the relative reference (mean over bodies), their linear and angular velocities
against the clip's (world frame, mean over bodies). Penalties: action rate, soft joint-limit
violation, and the number of bodies in undesired contact (from a contact sensor the env asks
the backend for; a backend without contact sensing refuses the env at construction).
"""

from __future__ import annotations

import torch

from unilab.tasks.tracking.mdp.commands import MotionCommand
from unilab.terms.rewards import joint_limit_violation, soft_joint_limits

_KERNELS = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel")


class tracking_rewards:
    """params: command_name, std (component -> std, the six kernels), soft_factor,
    contact_sensor (a configured contact sensor's name, or None to leave the term at 0)."""

    components = (*_KERNELS, "action_rate", "joint_limits", "undesired_contacts")

    def __init__(self, cfg, env) -> None:
        p = cfg.params
        self.command = env.command_manager.term(p["command_name"], "tracking_rewards")
        if not isinstance(self.command, MotionCommand):
            raise ValueError(f"command {p['command_name']!r} is a {type(self.command).__name__}, not a MotionCommand")
        std = p["std"]
        missing = sorted(set(_KERNELS) - set(std))
        if missing:
            raise ValueError(f"std: missing {missing}; needs one per kernel: {list(_KERNELS)}")
        # exp(error * (-1/std^2)): the sign folded into the constant, one kernel fewer per step.
        self.neg_inv_var = torch.tensor([-1.0 / std[k] ** 2 for k in _KERNELS], device=env.device)
        self.lo, self.hi = soft_joint_limits(env, p.get("soft_factor", 0.9))
        self.contact_sensor = p.get("contact_sensor")
        if self.contact_sensor is not None:
            env.robot.contact(self.contact_sensor, "tracking_rewards")  # a configured sensor: checked now
        self.zeros = torch.zeros(env.num_envs, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        c, robot, am = self.command, env.robot, env.action_manager
        pos, ang = c.errors()
        pos_sq, ang_sq = pos.square().sum(-1), ang.square()
        vel = torch.stack((robot.body_lin_vel_w.index_select(1, c.body_index),
                           robot.body_ang_vel_w.index_select(1, c.body_index)), dim=1)
        vel_sq = (c.ref_body_twist_w - vel).square().sum(-1).mean(-1)  # (N, 2): linear, angular
        errors = torch.stack((pos_sq[:, 0], ang_sq[:, 0], pos_sq[:, 1:].mean(-1), ang_sq[:, 1:].mean(-1),
                              vel_sq[:, 0], vel_sq[:, 1]), dim=1)
        contacts = (robot.contact(self.contact_sensor, "tracking_rewards").in_contact.sum(-1, dtype=torch.float32)
                    if self.contact_sensor is not None else self.zeros)
        return torch.cat((torch.exp(errors * self.neg_inv_var), torch.stack((
            (am.action - am.prev_action).square().sum(dim=1),
            joint_limit_violation(env, self.lo, self.hi),
            contacts), dim=1)), dim=1)
