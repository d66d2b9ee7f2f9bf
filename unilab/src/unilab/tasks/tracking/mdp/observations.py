"""Observations of the tracking task, in the robot anchor's frame."""

from __future__ import annotations

import torch

from unilab import math as lm
from unilab.tasks.tracking.mdp.commands import MotionCommand


class _MotionTerm:
    def __init__(self, cfg, env) -> None:
        name = cfg.params["command_name"]
        self.command = env.command_manager.term(name, type(self).__name__)
        if not isinstance(self.command, MotionCommand):
            raise ValueError(f"command {name!r} is a {type(self.command).__name__}, not a MotionCommand")


class motion_anchor_pos_b(_MotionTerm):
    """The reference anchor's position in the robot anchor's frame (3)."""

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        return lm.quat_apply_inverse(c.robot_anchor_quat_w, c.ref_anchor_pos_w - c.robot_anchor_pos_w)


class motion_anchor_ori_b(_MotionTerm):
    """The reference anchor's orientation in the robot anchor's frame, as the first two
    columns of its rotation matrix (6)."""

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        return lm.matrix_first_two_columns(lm.quat_mul(lm.quat_conjugate(c.robot_anchor_quat_w), c.ref_anchor_quat_w))


class robot_body_pos_b(_MotionTerm):
    """The robot's tracked bodies in its anchor's frame (3 per body)."""

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        k = c.body_index.shape[0]
        anchor_q = c.robot_anchor_quat_w.unsqueeze(1).expand(-1, k, -1)
        rel = lm.quat_apply_inverse(anchor_q, c.robot_body_pos_w - c.robot_anchor_pos_w.unsqueeze(1))
        return rel.reshape(rel.shape[0], -1)


class robot_body_ori_b(_MotionTerm):
    """The robot's tracked bodies' orientations in its anchor's frame (6 per body)."""

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        k = c.body_index.shape[0]
        anchor_q = c.robot_anchor_quat_w.unsqueeze(1).expand(-1, k, -1)
        rel = lm.matrix_first_two_columns(lm.quat_mul(lm.quat_conjugate(anchor_q), c.robot_body_quat_w))
        return rel.reshape(rel.shape[0], -1)
