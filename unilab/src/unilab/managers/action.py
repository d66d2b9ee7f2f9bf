"""Action manager: policy actions -> joint position targets (the backend's ctrl)."""

from __future__ import annotations

import re

import torch

from unilab.config import ActionCfg
from unilab.mirror import Mirror, build_mirror, combine


class ActionManager:
    """ctrl = offset + scale * clip(action) for the selected actuators; the rest hold offset.

    Scale and offset are per joint; the offset is the reset keyframe's joint position so a
    zero action holds the default pose. Buffers are preallocated: no allocation per step.
    """

    def __init__(self, cfg: ActionCfg, env) -> None:
        robot = env.robot
        self.cfg = cfg
        n, nu = env.num_envs, len(robot.actuators)
        self.cols = robot.find_joints(cfg.joint_names, "actions")
        self.joint_names = tuple(robot.joint_names[c] for c in self.cols)
        self.action_dim = len(self.cols)
        self._full = self.cols == list(range(nu))
        scales = []
        for joint in self.joint_names:
            if isinstance(cfg.scale, float):
                scales.append(cfg.scale)
                continue
            match = [pat for pat in cfg.scale if re.fullmatch(pat, joint)]
            if not match:
                raise ValueError(f"actions.scale: no pattern matches joint {joint!r}; patterns: {list(cfg.scale)}")
            if len(match) > 1:  # no silent precedence: an override written after a catch-all must not lose to it
                raise ValueError(f"actions.scale: patterns {match} all match joint {joint!r}; give each joint one")
            scales.append(cfg.scale[match[0]])
        dev = env.device
        self.scale = torch.tensor(scales, dtype=torch.float32, device=dev)
        default = env.default_joint_pos if cfg.use_default_offset else torch.zeros(nu, device=dev)
        self.offset_full = default.clone()
        self.offset = default[self.cols].clone()
        self.action = torch.zeros(n, self.action_dim, device=dev)
        self.prev_action = torch.zeros_like(self.action)
        self.ctrl = self.offset_full.expand(n, nu).clone()
        self._clip = cfg.clip
        self.mirror = self._mirror(env) if cfg.mirror is not None else None

    def _mirror(self, env) -> Mirror:
        """The actions' reflection. Mirroring an action must mirror the joint target it
        sets, so the offset and the scale must be symmetric under it."""
        mirror = combine([build_mirror(self.cfg.mirror, env, self.action_dim, "actions.mirror")], 1, env.device,
                         "actions.mirror")
        for name, values, expected in (("offset", mirror(self.offset), self.offset),
                                       ("scale", mirror(self.scale).abs(), self.scale)):
            if not torch.allclose(values, expected, atol=1e-6):
                worst = int((values - expected).abs().argmax())
                raise ValueError(f"actions.mirror: the action {name} is not symmetric under the mirror (joint "
                                 f"{self.joint_names[worst]!r}: {float(expected[worst]):.4g} vs its mirror "
                                 f"{float(values[worst]):.4g}), so a mirrored action would not mirror the joint target")
        return mirror

    def process(self, action: torch.Tensor) -> torch.Tensor:
        """The control ``action`` sets. The action buffers change only in ``commit``, once the
        backend has taken the control: a step the backend refuses leaves them as they were."""
        a = action.clamp(*self._clip) if self._clip is not None else action
        if self._full:
            torch.addcmul(self.offset, a, self.scale, out=self.ctrl)
        else:
            self.ctrl[:, self.cols] = torch.addcmul(self.offset, a, self.scale)
        return self.ctrl

    def commit(self, action: torch.Tensor) -> None:
        """``action`` becomes the current action, the current one the previous."""
        self.prev_action.copy_(self.action)
        self.action.copy_(action)

    def reset(self, done: torch.Tensor) -> None:
        mask = done.unsqueeze(1)
        self.action.masked_fill_(mask, 0.0)
        self.prev_action.masked_fill_(mask, 0.0)
