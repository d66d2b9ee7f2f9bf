"""Observations of the tracking task, in the robot anchor's frame."""

from __future__ import annotations

import torch

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
        return self.command.in_anchor_frame()[0][:, 0]


class motion_anchor_ori_b(_MotionTerm):
    """The reference anchor's orientation in the robot anchor's frame, as the first two
    columns of its rotation matrix (6)."""

    def __call__(self, env) -> torch.Tensor:
        return self.command.in_anchor_frame()[1][:, 0]


class robot_body_pos_b(_MotionTerm):
    """The robot's tracked bodies in its anchor's frame (3 per body)."""

    def __call__(self, env) -> torch.Tensor:
        pos_b = self.command.in_anchor_frame()[0][:, 1:]
        return pos_b.reshape(pos_b.shape[0], -1)


class robot_body_ori_b(_MotionTerm):
    """The robot's tracked bodies' orientations in its anchor's frame (6 per body)."""

    def __call__(self, env) -> torch.Tensor:
        ori_b = self.command.in_anchor_frame()[1][:, 1:]
        return ori_b.reshape(ori_b.shape[0], -1)
