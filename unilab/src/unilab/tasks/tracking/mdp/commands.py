"""The motion command: every env follows a frame of a reference clip, one frame per step.

``frame`` is the *target*: the clip frame the next physics state is to match, one frame
ahead of the robot's state between steps. After a reset the robot is written from the drawn
start frame and the target is the frame after it; physics then moves the state to the
target's time, where terminations, rewards and metrics compare the two, and the command
advances. So the policy always observes the frame it is to reach, and every comparison is
between the state and the clip at the same time. (``state_frame`` reads the frame the state
is at between steps: the reset event and the evaluation use it.)

``command`` is the reference joint state of the target frame, (N, 2J): positions then
velocities. The reference is also given relative to the robot, as BeyondMimic defines it:
the clip's anchor body (the torso) is moved to the robot anchor's x, y (keeping the clip's
height) and turned about z to the robot anchor's heading; every tracked body follows that
rigid yaw-and-shift. Rewards, observations and terminations read these through the
properties below, computed once per state and frame.

Episodes start at frames drawn by ``StartSampler`` (adaptive, uniform or the clip start;
always before the clip's last frame). A clip's end is a time-out: the step whose state
reached the clip's last frame is truncated (the value bootstraps) and starts a new draw, so
the reference never jumps inside an episode and the reset transaction stays the only state
write. A clip of F frames is F - 1 steps from its first frame.

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
        # The robot's anchor, then its tracked bodies: one gather per body view and state.
        self._robot_rows = torch.cat((torch.tensor([self.anchor_body], device=dev), self.body_index))
        root_name = robot.inventory.bodies[robot.root_body].name
        from unilab.assets.motion import load_library  # leaf I/O: clip files, pinned clips fetched once

        library = load_library(list(cfg.clips), cfg.weights)
        clips = list(library.clips)
        self.library = FrameTable(clips, robot.joint_names, root_name, tuple(cfg.body_names), 1.0 / env.step_dt,
                                  dev, owner)
        self.sampler = StartSampler([c.num_frames for c in clips], library.weights.tolist(),
                                    max(1, round(cfg.bin_s / env.step_dt)), cfg.sampling, cfg.adaptive_uniform_ratio,
                                    cfg.adaptive_alpha, cfg.adaptive_kernel_size, cfg.adaptive_lambda, dev)
        # Per env, updated in place (each keeps one storage for the env's life): its clip, its
        # target frame, the clip's last frame and first row in the packed table, the target's
        # row index and its packed reference row (``command`` is a view of it).
        i64 = dict(dtype=torch.int64, device=dev)
        self.clip = torch.zeros(n, **i64)
        self.frame = torch.ones(n, **i64)  # every clip has >= 2 frames
        self.last_frame, self.clip_start, self.index = (torch.zeros(n, **i64) for _ in range(3))
        self.ref = torch.empty(n, self.library.packed.shape[1], device=dev)
        self.command = self._columns("joint_pos", "joint_vel")
        # Bumps when frames change: what depends on the reference is cached per state and version.
        self._version = 0
        self._set_frames(torch.ones(n, dtype=torch.bool, device=dev), self.clip, self.frame)
        self.assigned: torch.Tensor | None = None

    def assign(self, clips: torch.Tensor | None) -> None:
        """Evaluation hook: every episode of env i plays clip ``clips[i]`` from its first frame
        (no sampling) until ``assign(None)``."""
        if clips is not None and (clips.shape != self.clip.shape or bool((clips < 0).any())
                                  or bool((clips >= self.library.num_clips).any())):
            raise ValueError(f"clips: expected {tuple(self.clip.shape)} clip indices in [0, {self.library.num_clips})")
        self.assigned = None if clips is None else clips.to(self.clip.device, torch.int64)
        self.env.invalidate_step_graphs()  # a step's Python changes: assigned clips skip sampling

    # ---- the frame ----------------------------------------------------------------------
    def _set_frames(self, rows: torch.Tensor, clip: torch.Tensor, frame: torch.Tensor) -> None:
        """``rows`` take ``clip`` and target ``frame``; every row's reference is gathered again."""
        torch.where(rows, clip, self.clip, out=self.clip)
        torch.where(rows, frame, self.frame, out=self.frame)
        torch.sub(self.library.length[self.clip], 1, out=self.last_frame)
        torch.index_select(self.library.start, 0, self.clip, out=self.clip_start)
        self._look_up()

    def _look_up(self) -> None:
        # The target's whole reference in one gather; the properties below are views of it.
        torch.add(self.clip_start, self.frame, out=self.index)
        torch.index_select(self.library.packed, 0, self.index, out=self.ref)
        self._version += 1

    def _columns(self, first: str, last: str | None = None) -> torch.Tensor:
        return self.ref[:, self.library.span(first, last)]

    def _bodies(self, name: str, width: int) -> torch.Tensor:
        return self._columns(name).view(-1, self.body_index.shape[0], width)

    def state_frame(self, *quantities: str) -> tuple[torch.Tensor, ...]:
        """``FrameTable`` columns (e.g. "joint_pos", "body_pos") of the frame the robot's state
        is at between steps, one before the target: after a reset, the frame the episode was
        written from; after a step, the clip at the time of the state physics reached. One
        gather (the target's row is what the properties below read)."""
        row = self.library.packed.index_select(0, self.index - 1)
        return tuple(row[:, self.library.columns[q]] for q in quantities)

    def at_clip_end(self) -> torch.Tensor:
        return self.frame >= self.last_frame

    def step(self, dt: float) -> None:
        torch.minimum(self.frame + 1, self.last_frame, out=self.frame)
        self._look_up()

    def reset(self, done: torch.Tensor) -> None:
        env = self.env
        failed = done & env.termination_manager.terminated
        # The failing state was at the target before this step's advance: one frame back.
        self.sampler.record(self.clip, self.frame - 1, failed)
        if self.assigned is not None:
            clip, frame = self.assigned, torch.zeros_like(self.assigned)
        else:
            clip, frame = self.sampler.sample(env.num_envs, env.rng)
        # The episode starts on the drawn frame (the reset event writes it); the target is the next.
        self._set_frames(done, clip, frame + 1)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.sampler.state_dict()  # where episodes failed: adaptive sampling's statistics

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.sampler.load_state_dict(state)

    def refresh(self) -> None:
        self._version += 1  # the robot anchor moved (reset rows): the relative reference changes

    # ---- the reference at the target frame ---------------------------------------------------
    @property
    def ref_joint_pos(self) -> torch.Tensor:
        return self._columns("joint_pos")

    @property
    def ref_joint_vel(self) -> torch.Tensor:
        return self._columns("joint_vel")

    @property
    def ref_body_pos_w(self) -> torch.Tensor:
        return self._bodies("body_pos", 3)

    @property
    def ref_body_quat_w(self) -> torch.Tensor:
        return self._bodies("body_quat", 4)

    @property
    def ref_body_lin_vel_w(self) -> torch.Tensor:
        return self._bodies("body_lin_vel", 3)

    @property
    def ref_body_ang_vel_w(self) -> torch.Tensor:
        return self._bodies("body_ang_vel", 3)

    @property
    def ref_body_twist_w(self) -> torch.Tensor:
        """Linear then angular velocities of the tracked bodies, (N, 2, K, 3) (adjacent columns)."""
        return self._columns("body_lin_vel", "body_ang_vel").view(-1, 2, self.body_index.shape[0], 3)

    @property
    def ref_anchor_pos_w(self) -> torch.Tensor:
        return self.ref_body_pos_w[:, self.anchor]

    @property
    def ref_anchor_quat_w(self) -> torch.Tensor:
        return self.ref_body_quat_w[:, self.anchor]

    # ---- the robot -----------------------------------------------------------------------
    def robot_poses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The robot's anchor, then its tracked bodies: positions (N, K+1, 3) and orientations
        (N, K+1, 4) (cached for this state)."""
        robot = self.env.robot
        return robot.cached(("motion_robot_poses", id(self)), lambda: (
            robot.body_pos_w.index_select(1, self._robot_rows), robot.body_quat_w.index_select(1, self._robot_rows)))

    @property
    def robot_body_pos_w(self) -> torch.Tensor:
        return self.robot_poses()[0][:, 1:]

    @property
    def robot_body_quat_w(self) -> torch.Tensor:
        return self.robot_poses()[1][:, 1:]

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
        pos, quat = self._reference_poses()
        return pos[:, 1:], quat[:, 1:]

    def _reference_poses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The clip's anchor (global), then the relative reference of the tracked bodies:
        (N, K+1, 3), (N, K+1, 4), row for row against ``robot_poses``."""
        return self.env.robot.cached(("motion_reference", id(self), self._version), self._reference)

    def _reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        ref_anchor_pos, ref_anchor_quat = self.ref_anchor_pos_w, self.ref_anchor_quat_w
        robot_anchor_pos = self.robot_anchor_pos_w
        delta_pos = torch.cat((robot_anchor_pos[:, :2], ref_anchor_pos[:, 2:]), dim=1)
        delta_quat = lm.yaw_quat(lm.quat_mul(self.robot_anchor_quat_w, lm.quat_conjugate(ref_anchor_quat)))
        dq = delta_quat.unsqueeze(1).expand(-1, self.body_index.shape[0], -1)
        pos = delta_pos.unsqueeze(1) + lm.quat_apply(dq, self.ref_body_pos_w - ref_anchor_pos.unsqueeze(1))
        quat = lm.quat_mul(dq, self.ref_body_quat_w)
        return (torch.cat((ref_anchor_pos.unsqueeze(1), pos), dim=1),
                torch.cat((ref_anchor_quat.unsqueeze(1), quat), dim=1))

    def errors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference minus robot, anchor first then the tracked bodies: positions (N, K+1, 3)
        (the anchor against the clip, the bodies against the relative reference) and
        orientation error angles (N, K+1); shared by rewards, terminations and metrics
        (cached for this state and frame)."""
        return self.env.robot.cached(("motion_errors", id(self), self._version), self._errors)

    def _errors(self) -> tuple[torch.Tensor, torch.Tensor]:
        (ref_pos, ref_quat), (robot_pos, robot_quat) = self._reference_poses(), self.robot_poses()
        return ref_pos - robot_pos, lm.quat_error_magnitude(ref_quat, robot_quat)

    def in_anchor_frame(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference anchor, then the robot's tracked bodies, in the robot anchor's frame:
        positions (N, K+1, 3) and the first two rotation columns (N, K+1, 6) (what the
        observations read; cached for this state and frame)."""
        return self.env.robot.cached(("motion_anchor_frame", id(self), self._version), self._in_anchor_frame)

    def _in_anchor_frame(self) -> tuple[torch.Tensor, torch.Tensor]:
        anchor_pos, anchor_quat = self.robot_anchor_pos_w, self.robot_anchor_quat_w
        robot_pos, robot_quat = self.robot_poses()
        pos = torch.cat((self.ref_anchor_pos_w.unsqueeze(1), robot_pos[:, 1:]), dim=1)
        quat = torch.cat((self.ref_anchor_quat_w.unsqueeze(1), robot_quat[:, 1:]), dim=1)
        anchor_q = anchor_quat.unsqueeze(1).expand(-1, pos.shape[1], -1)
        pos_b = lm.quat_apply_inverse(anchor_q, pos - anchor_pos.unsqueeze(1))
        ori_b = lm.matrix_first_two_columns(lm.quat_mul(lm.quat_conjugate(anchor_q), quat))
        return pos_b, ori_b

    def metrics(self) -> torch.Tensor:
        pos, ang = self.errors()
        entropy, top = self.sampler.entropy_and_top()
        dist = torch.linalg.vector_norm(pos, dim=-1)
        return torch.stack((dist[:, 0].mean(), ang[:, 0].mean(), dist[:, 1:].mean(), ang[:, 1:].mean(),
                            (self.ref_joint_pos - self.env.robot.joint_pos).abs().mean(), entropy, top))


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
