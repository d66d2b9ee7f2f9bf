"""The motion command: every env follows a frame of a reference clip, one frame per step.

``command`` is the reference joint state of the current frame, (N, 2J): positions then
velocities. The reference is also given relative to the robot, as BeyondMimic defines it:
the clip's anchor body (the torso) is moved to the robot anchor's x, y (keeping the clip's
height) and turned about z to the robot anchor's heading; every tracked body follows that
rigid yaw-and-shift. Rewards, observations and terminations read these through the
properties below, computed once per state and frame.

Episodes start at frames drawn by ``StartSampler`` (adaptive, uniform or the clip start).
A clip's end is a time-out: an env on a clip's last frame is truncated (the value
bootstraps) and starts a new draw, so the reference never jumps inside an episode and the
reset transaction stays the only state write.

Metrics (per step, mean over envs): ``error_anchor_pos`` (m), ``error_anchor_rot`` (rad),
``error_body_pos`` (m, mean over tracked bodies, against the relative reference),
``error_body_rot`` (rad), ``error_joint_pos`` (rad, mean over joints),
``sampling_entropy`` (1 = uniform over bins) and ``sampling_top1_prob``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field, model_validator

from unilab import math as lm
from unilab.config import CommandTermCfg
from unilab.managers.command import CommandTerm
from unilab.tasks.tracking.mdp.frame_table import FrameTable
from unilab.tasks.tracking.mdp.sampling import StartSampler


class MotionCommand(CommandTerm):
    metric_names = ("error_anchor_pos", "error_anchor_rot", "error_body_pos", "error_body_rot", "error_joint_pos",
                    "sampling_entropy", "sampling_top1_prob")

    def __init__(self, cfg: MotionCommandCfg, env) -> None:
        super().__init__(cfg, env)
        robot, dev, n = env.robot, env.device, env.num_envs
        owner = "MotionCommand"
        self.body_index = torch.tensor([robot.body_index(b, owner) for b in cfg.body_names], device=dev)
        self.anchor = list(cfg.body_names).index(cfg.anchor_body)
        self.anchor_body = robot.body_index(cfg.anchor_body, owner)
        root_name = robot.inventory.bodies[robot.root_body].name
        from unilab.assets.motion import load_library  # leaf I/O: clip files, pinned clips fetched once

        library = load_library(list(cfg.clips), cfg.weights)
        clips = list(library.clips)
        self.library = FrameTable(clips, robot.joint_names, root_name, tuple(cfg.body_names), 1.0 / env.step_dt,
                                  dev, owner)
        self.sampler = StartSampler([c.num_frames for c in clips], library.weights.tolist(),
                                    max(1, round(cfg.bin_s / env.step_dt)), cfg.sampling, cfg.adaptive_uniform_ratio,
                                    cfg.adaptive_alpha, cfg.adaptive_kernel_size, cfg.adaptive_lambda, dev)
        self.clip = torch.zeros(n, dtype=torch.int64, device=dev)
        self.frame = torch.zeros(n, dtype=torch.int64, device=dev)
        self.index = self.library.index(self.clip, self.frame)
        self.command = torch.cat((self.library.joint_pos[self.index], self.library.joint_vel[self.index]), dim=1)
        self._version = 0  # bumps when frames change: the relative reference is cached per state and version
        self.assigned: torch.Tensor | None = None

    def assign(self, clips: torch.Tensor | None) -> None:
        """Evaluation hook: every episode of env i plays clip ``clips[i]`` from its first frame
        (no sampling) until ``assign(None)``."""
        if clips is not None and (clips.shape != self.clip.shape or bool((clips < 0).any())
                                  or bool((clips >= self.library.num_clips).any())):
            raise ValueError(f"clips: expected {tuple(self.clip.shape)} clip indices in [0, {self.library.num_clips})")
        self.assigned = None if clips is None else clips.to(self.clip.device, torch.int64)

    # ---- the frame ----------------------------------------------------------------------
    def _set_frames(self, clip: torch.Tensor, frame: torch.Tensor) -> None:
        self.clip, self.frame = clip, frame
        self.index = self.library.index(clip, frame)
        lib = self.library
        self.command = torch.cat((lib.joint_pos[self.index], lib.joint_vel[self.index]), dim=1)
        self._version += 1

    def at_clip_end(self) -> torch.Tensor:
        return self.frame >= self.library.length[self.clip] - 1

    def step(self, dt: float) -> None:
        self._set_frames(self.clip, torch.minimum(self.frame + 1, self.library.length[self.clip] - 1))

    def reset(self, done: torch.Tensor) -> None:
        env = self.env
        failed = done & env.termination_manager.terminated
        self.sampler.record(self.clip, self.frame, failed)
        if self.assigned is not None:
            clip, frame = self.assigned, torch.zeros_like(self.assigned)
        else:
            clip, frame = self.sampler.sample(env.num_envs, env.rng)
        self._set_frames(torch.where(done, clip, self.clip), torch.where(done, frame, self.frame))

    def refresh(self) -> None:
        self._version += 1  # the robot anchor moved (reset rows): the relative reference changes

    # ---- the reference at the current frame ------------------------------------------------
    @property
    def ref_joint_pos(self) -> torch.Tensor:
        return self.library.joint_pos[self.index]

    @property
    def ref_root_state(self) -> tuple[torch.Tensor, ...]:
        lib, i = self.library, self.index
        return lib.root_pos[i], lib.root_quat[i], lib.root_lin_vel[i], lib.root_ang_vel[i]

    @property
    def ref_body_pos_w(self) -> torch.Tensor:
        return self.library.body_pos[self.index]

    @property
    def ref_body_quat_w(self) -> torch.Tensor:
        return self.library.body_quat[self.index]

    @property
    def ref_body_lin_vel_w(self) -> torch.Tensor:
        return self.library.body_lin_vel[self.index]

    @property
    def ref_body_ang_vel_w(self) -> torch.Tensor:
        return self.library.body_ang_vel[self.index]

    @property
    def ref_anchor_pos_w(self) -> torch.Tensor:
        return self.library.body_pos[self.index, self.anchor]

    @property
    def ref_anchor_quat_w(self) -> torch.Tensor:
        return self.library.body_quat[self.index, self.anchor]

    # ---- the robot -----------------------------------------------------------------------
    @property
    def robot_body_pos_w(self) -> torch.Tensor:
        return self.env.robot.body_pos_w[:, self.body_index]

    @property
    def robot_body_quat_w(self) -> torch.Tensor:
        return self.env.robot.body_quat_w[:, self.body_index]

    @property
    def robot_anchor_pos_w(self) -> torch.Tensor:
        return self.env.robot.body_pos_w[:, self.anchor_body]

    @property
    def robot_anchor_quat_w(self) -> torch.Tensor:
        return self.env.robot.body_quat_w[:, self.anchor_body]

    # ---- the reference moved onto the robot ------------------------------------------------
    def relative(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Tracked bodies' reference poses (N, K, 3), (N, K, 4), shifted and turned onto
        the robot anchor (cached for this state and frame)."""
        return self.env.robot.cached(("motion_relative", id(self), self._version), self._relative)

    def _relative(self) -> tuple[torch.Tensor, torch.Tensor]:
        ref_anchor_pos, ref_anchor_quat = self.ref_anchor_pos_w, self.ref_anchor_quat_w
        robot_anchor_pos = self.robot_anchor_pos_w
        delta_pos = torch.cat((robot_anchor_pos[:, :2], ref_anchor_pos[:, 2:]), dim=1)
        delta_quat = lm.yaw_quat(lm.quat_mul(self.robot_anchor_quat_w, lm.quat_conjugate(ref_anchor_quat)))
        k = self.body_index.shape[0]
        dq = delta_quat.unsqueeze(1).expand(-1, k, -1)
        pos = delta_pos.unsqueeze(1) + lm.quat_apply(dq, self.ref_body_pos_w - ref_anchor_pos.unsqueeze(1))
        quat = lm.quat_mul(dq, self.ref_body_quat_w)
        return pos, quat

    def metrics(self) -> torch.Tensor:
        rel_pos, rel_quat = self.relative()
        entropy, top = self.sampler.entropy_and_top()
        return torch.stack((
            torch.linalg.vector_norm(self.ref_anchor_pos_w - self.robot_anchor_pos_w, dim=-1).mean(),
            lm.quat_error_magnitude(self.ref_anchor_quat_w, self.robot_anchor_quat_w).mean(),
            torch.linalg.vector_norm(rel_pos - self.robot_body_pos_w, dim=-1).mean(),
            lm.quat_error_magnitude(rel_quat, self.robot_body_quat_w).mean(),
            (self.ref_joint_pos - self.env.robot.joint_pos).abs().mean(),
            entropy, top))


class MotionCommandCfg(CommandTermCfg):
    """``clips``: pinned clip names or canonical clip files (a library), sampled by
    ``weights``. ``body_names``: the tracked bodies, ``anchor_body`` among them."""

    type: Literal["motion"] = "motion"
    term_class: ClassVar[type] = MotionCommand
    clips: tuple[str, ...] = Field(min_length=1)
    weights: tuple[float, ...] | None = None
    anchor_body: str
    body_names: tuple[str, ...] = Field(min_length=1)
    sampling: Literal["adaptive", "uniform", "start"] = "adaptive"
    bin_s: float = Field(default=1.0, gt=0.0)
    adaptive_uniform_ratio: float = Field(default=0.1, gt=0.0)
    adaptive_alpha: float = Field(default=0.001, gt=0.0, le=1.0)
    adaptive_kernel_size: int = Field(default=1, ge=1)
    adaptive_lambda: float = Field(default=0.8, gt=0.0, le=1.0)

    @model_validator(mode="after")
    def _consistent(self) -> MotionCommandCfg:
        if self.anchor_body not in self.body_names:
            raise ValueError(f"anchor_body {self.anchor_body!r} must be one of body_names {list(self.body_names)}")
        if self.weights is not None and (len(self.weights) != len(self.clips) or min(self.weights) <= 0):
            raise ValueError(f"weights: expected {len(self.clips)} positive numbers, one per clip, got {self.weights}")
        return self
