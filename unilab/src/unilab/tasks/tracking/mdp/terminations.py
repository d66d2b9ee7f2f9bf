"""Terminations of the tracking task, fused: one (N, 4) term.

- ``anchor_height``: the anchor's height differs from the clip's by more than
  ``anchor_height`` m;
- ``anchor_ori``: the z component of gravity in the anchor frame differs from the clip's by
  more than ``anchor_ori`` (it tilted away from the reference);
- ``end_effector_height``: a named end effector's height differs from the relative
  reference's by more than ``end_effector_height`` m;
- ``clip_end``: the reference reached its clip's last frame (a time-out: list it in the
  config's ``time_out_components``).
"""

from __future__ import annotations

import torch

from unilab import math as lm
from unilab.tasks.tracking.mdp.commands import MotionCommand


class tracking_terminations:
    components = ("anchor_height", "anchor_ori", "end_effector_height", "clip_end")

    def __init__(self, cfg, env) -> None:
        p = cfg.params
        self.command = env.command_manager.term(p["command_name"], "tracking_terminations")
        if not isinstance(self.command, MotionCommand):
            raise ValueError(f"command {p['command_name']!r} is a {type(self.command).__name__}, not a MotionCommand")
        tracked = list(self.command.cfg.body_names)
        unknown = [b for b in p["end_effectors"] if b not in tracked]
        if unknown:
            raise ValueError(f"end_effectors {unknown} are not tracked bodies; tracked: {tracked}")
        self.ee = torch.tensor([tracked.index(b) for b in p["end_effectors"]], device=env.device)
        self.anchor_height, self.anchor_ori, self.ee_height = p["anchor_height"], p["anchor_ori"], \
            p["end_effector_height"]

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        rel_pos, _ = c.relative()
        anchor_z = (c.ref_anchor_pos_w[:, 2] - c.robot_anchor_pos_w[:, 2]).abs() > self.anchor_height
        tilt = (lm.projected_gravity(c.ref_anchor_quat_w)[:, 2]
                - lm.projected_gravity(c.robot_anchor_quat_w)[:, 2]).abs() > self.anchor_ori
        ee = ((rel_pos[:, self.ee, 2] - c.robot_body_pos_w[:, self.ee, 2]).abs() > self.ee_height).any(dim=1)
        return torch.stack((anchor_z, tilt, ee, c.at_clip_end()), dim=1)
