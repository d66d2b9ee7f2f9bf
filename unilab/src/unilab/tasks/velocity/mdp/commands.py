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

_STATE_WIDTH = 7  # twist (3), moving, heading row, heading target, time left


class UniformVelocityCommand(CommandTerm):
    """Metrics: ``lin_vel_error`` (norm of the planar velocity error, m/s), ``ang_vel_error``
    (yaw-rate error, rad/s) and ``ang_vel_offset`` (achieved minus commanded yaw rate, + to the
    left), mean over envs, of the state physics just reached against the command the policy acted
    on. Over a command distribution symmetric in yaw the offset stays near 0, unless the policy
    turns one way whatever it is asked, which the unsigned error does not tell from poor tracking."""

    metric_names = ("lin_vel_error", "ang_vel_error", "ang_vel_offset")

    def __init__(self, cfg: UniformVelocityCommandCfg, env) -> None:
        super().__init__(cfg, env)
        n, dev = env.num_envs, env.device
        self.command = torch.zeros(n, 3, device=dev)
        # Every per-row value a resample draws, in one tensor, so keeping a row's new draw is one
        # ``where``: the twist (3), moving (1.0, else 0.0 for a standing row), heading row (1.0 /
        # 0.0), heading target, time left. The named attributes are views of its columns.
        self.state = torch.zeros(n, _STATE_WIDTH, device=dev)
        self.sampled = self.state[:, :3]
        self.moving = self.state[:, 3]
        self.heading_row = self.state[:, 4]
        self.heading_target = self.state[:, 5]
        self.time_left = self.state[:, 6]
        self._candidates: torch.Tensor | None = None
        self.held = False
        # A draw is ``low + width * u`` per column of one uniform (N, 7) draw. The two flag columns
        # come out as u - standing_fraction and heading_fraction - u, so a flag is "column >= 0"
        # (a row never heads without heading commands: -1 + 0 u).
        h0, h1 = cfg.heading_range
        t0, t1 = cfg.resampling_time_range_s
        heading_low, heading_width = (cfg.heading_fraction, -1.0) if cfg.heading_command else (-1.0, 0.0)
        self.draw_low = torch.tensor([0.0, 0.0, 0.0, -cfg.standing_fraction, heading_low, h0, t0], device=dev)
        self.draw_width = torch.tensor([0.0, 0.0, 0.0, 1.0, heading_width, h1 - h0, t1 - t0], device=dev)
        self.lo, self.width = self.draw_low[:3], self.draw_width[:3]  # the twist's ranges (the curriculum's)
        # The heading controller's yaw-rate limits, as tensors updated in place: a replayed step
        # graph reads them by pointer, where Python numbers would stay the ones it was captured with.
        self.yaw_rate_limits = torch.zeros(2, device=dev)
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
        self.moving.fill_(1.0)
        self.heading_row.fill_(0.0)
        self._update()

    def set_ranges(self, lin_vel_x=None, lin_vel_y=None, ang_vel_z=None) -> None:
        """Curriculum hook: new ranges apply to the next resample."""
        cfg = self.cfg
        ranges = [lin_vel_x or cfg.lin_vel_x, lin_vel_y or cfg.lin_vel_y, ang_vel_z or cfg.ang_vel_z]
        self.ranges = tuple(tuple(map(float, r)) for r in ranges)
        self.lo.copy_(torch.tensor([r[0] for r in self.ranges]))
        self.width.copy_(torch.tensor([r[1] - r[0] for r in self.ranges]))
        self.yaw_rate_limits.copy_(torch.tensor(self.ranges[2]))

    def metrics(self) -> torch.Tensor:
        r = self.env.robot
        err = torch.cat((r.root_lin_vel_b[:, :2], r.root_ang_vel_b[:, 2:]), dim=1) - self.command
        yaw = err[:, 2]
        return torch.stack((torch.linalg.vector_norm(err[:, :2], dim=1).mean(), yaw.abs().mean(), yaw.mean()))

    def _draw(self, n: int) -> torch.Tensor:
        """Candidate samples for ``n`` rows, laid out as ``state``."""
        g, dev, cfg = self.env.rng, self.env.device, self.cfg
        u = torch.rand(n, _STATE_WIDTH, generator=g, device=dev)
        draw = torch.addcmul(self.draw_low, self.draw_width, u)
        draw[:, 3:5] = draw[:, 3:5] >= 0.0  # moving: u >= standing_fraction; heading: u <= heading_fraction
        if cfg.single_axis_fraction > 0.0:  # drawn only when asked, so the default keeps its stream
            v = torch.rand(n, 2, generator=g, device=dev)
            kept_axis = (v[:, 1] * 3.0).long().clamp_(max=2)
            other_axes = constant((0, 1, 2), dev, torch.int64) != kept_axis[:, None]
            draw[:, :3].masked_fill_(other_axes & (v[:, :1] < cfg.single_axis_fraction), 0.0)
        return draw

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
        torch.where(rows[:, None], self._candidates, self.state, out=self.state)

    def _update(self) -> None:
        cmd = self.sampled
        if self.cfg.heading_command:
            err = wrap_to_pi(self.heading_target - self.env.robot.heading_w)
            yaw_rate = (self.cfg.heading_stiffness * err).clamp(self.yaw_rate_limits[0], self.yaw_rate_limits[1])
            cmd = torch.cat((cmd[:, :2], torch.where(self.heading_row > 0.5, yaw_rate, cmd[:, 2]).unsqueeze(1)), dim=1)
        torch.mul(cmd, self.moving.unsqueeze(1), out=self.command)

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
