"""The velocity command: body-frame twist (vx, vy, yaw rate) resampled every few seconds.

Resampling on timers is sync-free: every step draws candidates for all envs and
``torch.where`` keeps the ones whose timer expired, so no row list (host sync) is
needed. Reset rows resample the same way through ``reset(done_mask)``, from the same
step's candidates. Standing envs get a zero command; single-axis draws keep one of the three
axes (chosen uniformly) and zero the other two, the commands a joystick mostly gives, which a
box sampled jointly almost never does (a turn in place at 0.5 rad/s, say); heading envs
replace the yaw rate with a clipped P-controller on a sampled heading (re-evaluated every
step from the current yaw). The command's tensors (and the curriculum's ranges) are updated
in place, so each keeps one storage for the env's life.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from pydantic import Field

from unilab.config import CommandTermCfg, Range, TimeRange
from unilab.managers.command import CommandTerm
from unilab.math import constant, wrap_to_pi


class UniformVelocityCommand(CommandTerm):
    """Metrics: ``lin_vel_error`` (norm of the planar velocity error, m/s) and
    ``ang_vel_error`` (yaw-rate error, rad/s), mean over envs, of the state physics just
    reached against the command the policy acted on."""

    metric_names = ("lin_vel_error", "ang_vel_error")

    def __init__(self, cfg: UniformVelocityCommandCfg, env) -> None:
        super().__init__(cfg, env)
        n, dev = env.num_envs, env.device
        self.command = torch.zeros(n, 3, device=dev)
        self.sampled = torch.zeros(n, 3, device=dev)
        self.time_left = torch.zeros(n, device=dev)
        self.is_standing = torch.zeros(n, dtype=torch.bool, device=dev)
        self.is_heading = torch.zeros(n, dtype=torch.bool, device=dev)
        self.heading_target = torch.zeros(n, device=dev)
        self._candidates: tuple[torch.Tensor, ...] | None = None
        self.held = False
        self.lo, self.width = torch.zeros(3, device=dev), torch.zeros(3, device=dev)
        self.set_ranges(cfg.lin_vel_x, cfg.lin_vel_y, cfg.ang_vel_z)

    def hold(self, commands: torch.Tensor | None) -> None:
        """Evaluation hook: pin every row's command to ``commands`` (N, 3) (no resampling, no
        standing or heading rows, across resets) until ``hold(None)``."""
        n = self.env.num_envs
        if commands is not None and commands.shape != (n, 3):
            raise ValueError(f"commands: expected shape ({n}, 3), got {tuple(commands.shape)}")
        self.env.invalidate_step_graphs()  # a step's Python changes: held rows skip resampling
        if commands is None:
            self.held = False
            return
        self.held = True
        self.sampled.copy_(commands)
        self.is_standing.fill_(False)
        self.is_heading.fill_(False)
        self._update()

    def set_ranges(self, lin_vel_x=None, lin_vel_y=None, ang_vel_z=None) -> None:
        """Curriculum hook: new ranges apply to the next resample."""
        cfg = self.cfg
        ranges = [lin_vel_x or cfg.lin_vel_x, lin_vel_y or cfg.lin_vel_y, ang_vel_z or cfg.ang_vel_z]
        self.ranges = tuple(tuple(map(float, r)) for r in ranges)
        self.lo.copy_(torch.tensor([r[0] for r in self.ranges]))
        self.width.copy_(torch.tensor([r[1] - r[0] for r in self.ranges]))

    def metrics(self) -> torch.Tensor:
        r = self.env.robot
        err = self.command - torch.cat((r.root_lin_vel_b[:, :2], r.root_ang_vel_b[:, 2:]), dim=1)
        return torch.stack((torch.linalg.vector_norm(err[:, :2], dim=1).mean(), err[:, 2].abs().mean()))

    def _draw(self, n: int) -> tuple[torch.Tensor, ...]:
        """Candidate samples for ``n`` rows: (twist, standing, heading env, heading, period)."""
        g, dev, cfg = self.env.rng, self.env.device, self.cfg
        u = torch.rand(n, 7, generator=g, device=dev)
        twist = self.lo + self.width * u[:, :3]
        if cfg.single_axis_fraction > 0.0:  # drawn only when asked, so the default keeps its stream
            v = torch.rand(n, 2, generator=g, device=dev)
            kept_axis = (v[:, 1] * 3.0).long().clamp_(max=2)
            other_axes = constant((0, 1, 2), dev, torch.int64) != kept_axis[:, None]
            twist = twist.masked_fill(other_axes & (v[:, :1] < cfg.single_axis_fraction), 0.0)
        standing = u[:, 3] < cfg.standing_fraction
        heading_env = (u[:, 4] < cfg.heading_fraction) if cfg.heading_command else torch.zeros_like(standing)
        h0, h1 = cfg.heading_range
        heading = h0 + (h1 - h0) * u[:, 5]
        t0, t1 = cfg.resampling_time_range_s
        period = t0 + (t1 - t0) * u[:, 6]
        return twist, standing, heading_env, heading, period

    def step(self, dt: float) -> None:
        if self.held:
            return
        self.time_left -= dt
        expired = self.time_left <= 0.0
        # One set of candidates per step serves both the expired rows here and the rows
        # that reset later in the step (a row doing both just keeps the same sample).
        self._candidates = self._draw(self.env.num_envs)
        self._keep_candidates_where(expired)
        self._update()

    def _keep_candidates_where(self, rows: torch.Tensor) -> None:
        twist, standing, heading_env, heading, period = self._candidates
        torch.where(rows[:, None], twist, self.sampled, out=self.sampled)
        torch.where(rows, standing, self.is_standing, out=self.is_standing)
        torch.where(rows, heading_env, self.is_heading, out=self.is_heading)
        torch.where(rows, heading, self.heading_target, out=self.heading_target)
        torch.where(rows, period, self.time_left, out=self.time_left)

    def _update(self) -> None:
        cmd = self.sampled
        if self.cfg.heading_command:
            err = wrap_to_pi(self.heading_target - self.env.robot.heading_w)
            yaw_rate = (self.cfg.heading_stiffness * err).clamp(*self.ranges[2])
            cmd = torch.cat((cmd[:, :2], torch.where(self.is_heading, yaw_rate, cmd[:, 2]).unsqueeze(1)), dim=1)
        torch.mul(cmd, (~self.is_standing).unsqueeze(1), out=self.command)

    def reset(self, done: torch.Tensor) -> None:
        """Resample the ``done`` rows (masked: this step's candidates, no row list)."""
        if self.held:
            return
        if self._candidates is None:  # a reset outside step (env.reset)
            self._candidates = self._draw(self.env.num_envs)
        self._keep_candidates_where(done)
        self._candidates = None

    def refresh(self) -> None:
        """Recompute ``command`` after a reset wrote new state (heading depends on yaw)."""
        self._update()


class UniformVelocityCommandCfg(CommandTermCfg):
    """Ranges are (low, high) per axis: vx, vy (m/s), yaw rate (rad/s)."""

    type: Literal["uniform_velocity"] = "uniform_velocity"
    term_class: ClassVar[type] = UniformVelocityCommand
    lin_vel_x: Range = (-1.0, 1.0)
    lin_vel_y: Range = (-0.5, 0.5)
    ang_vel_z: Range = (-1.0, 1.0)
    resampling_time_range_s: TimeRange = (3.0, 8.0)
    standing_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    single_axis_fraction: float = Field(default=0.0, ge=0.0, le=1.0)  # draws with one nonzero axis
    heading_command: bool = False  # yaw rate from a P-controller on a sampled heading
    heading_fraction: float = Field(default=0.3, ge=0.0, le=1.0)
    heading_stiffness: float = Field(default=0.5, ge=0.0)
    heading_range: Range = (-3.14159, 3.14159)
