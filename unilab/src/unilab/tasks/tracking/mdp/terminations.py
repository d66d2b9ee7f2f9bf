"""Terminations of the tracking task, fused: one (N, 4) term.

- ``anchor_height``: the anchor's height differs from the clip's by more than
  ``anchor_height`` m;
- ``anchor_ori``: the z component of gravity in the anchor frame differs from the clip's by
  more than ``anchor_ori`` (it tilted away from the reference);
- ``end_effector_height``: a named end effector's height differs from the relative
  reference's by more than ``end_effector_height`` m;
- ``clip_end``: the reference reached its clip's last frame (a time-out: list it in the
  config's ``time_out_components``).

Each limit is written as "not within it", so a world whose simulation diverged (NaN, which
fails every comparison) ends its episode instead of running to its time-out.
"""

from __future__ import annotations

import torch

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
        self.ee_rows = torch.tensor([1 + tracked.index(b) for b in p["end_effectors"]], device=env.device)
        self.anchor_height, self.anchor_ori, self.ee_height = p["anchor_height"], p["anchor_ori"], \
            p["end_effector_height"]

    def __call__(self, env) -> torch.Tensor:
        c = self.command
        pos, _ = c.errors()  # row 0 the anchor, rows 1.. the tracked bodies
        anchor_z = ~(pos[:, 0, 2].abs() <= self.anchor_height)
        # Gravity's z in a frame of unit quaternion (w, x, y, z) is 2 (x^2 + y^2) - 1: compare
        # x^2 + y^2 against half the limit instead of rotating the gravity vector twice.
        upright = (c.ref_anchor_quat_w[:, 1:3].square().sum(-1)
                   - c.robot_anchor_quat_w[:, 1:3].square().sum(-1)).abs() <= 0.5 * self.anchor_ori
        ee = ~(pos[:, self.ee_rows, 2].abs() <= self.ee_height).all(dim=1)
        return torch.stack((anchor_z, ~upright, ee, c.at_clip_end()), dim=1)
