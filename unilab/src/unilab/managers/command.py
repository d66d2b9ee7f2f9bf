"""Command manager: body-frame velocity commands (vx, vy, yaw rate) per env.

Resampling on timers is sync-free: every step draws candidates for all envs and
``torch.where`` keeps the ones whose timer expired, so no row list (host sync) is
needed. Reset rows resample the same way through ``reset(done_mask)``.
Standing envs get a zero command; heading envs replace the yaw rate with a clipped
P-controller on a sampled heading (re-evaluated every step from the current yaw).
"""

from __future__ import annotations

import torch

from unilab.config import VelocityCommandCfg
from unilab.math import wrap_to_pi


class VelocityCommand:
    def __init__(self, name: str, cfg: VelocityCommandCfg, env) -> None:
        self.name, self.cfg, self.env = name, cfg, env
        n, dev = env.num_envs, env.device
        self.command = torch.zeros(n, 3, device=dev)  # what observations/rewards read
        self.sampled = torch.zeros(n, 3, device=dev)
        self.time_left = torch.zeros(n, device=dev)
        self.is_standing = torch.zeros(n, dtype=torch.bool, device=dev)
        self.is_heading = torch.zeros(n, dtype=torch.bool, device=dev)
        self.heading_target = torch.zeros(n, device=dev)
        self._candidates: tuple[torch.Tensor, ...] | None = None
        self.set_ranges(cfg.lin_vel_x, cfg.lin_vel_y, cfg.ang_vel_z)

    def set_ranges(self, lin_vel_x=None, lin_vel_y=None, ang_vel_z=None) -> None:
        """Curriculum hook: new ranges apply to the next resample."""
        cfg = self.cfg
        ranges = [lin_vel_x or cfg.lin_vel_x, lin_vel_y or cfg.lin_vel_y, ang_vel_z or cfg.ang_vel_z]
        self.ranges = tuple(tuple(map(float, r)) for r in ranges)
        dev = self.env.device
        self.lo = torch.tensor([r[0] for r in self.ranges], device=dev)
        self.width = torch.tensor([r[1] - r[0] for r in self.ranges], device=dev)

    def _draw(self, n: int) -> tuple[torch.Tensor, ...]:
        """Candidate samples for ``n`` rows: (twist, standing, heading env, heading, period)."""
        g, dev, cfg = self.env.rng, self.env.device, self.cfg
        u = torch.rand(n, 7, generator=g, device=dev)
        twist = self.lo + self.width * u[:, :3]
        standing = u[:, 3] < cfg.standing_fraction
        heading_env = (u[:, 4] < cfg.heading_fraction) if cfg.heading_command else torch.zeros_like(standing)
        h0, h1 = cfg.heading_range
        heading = h0 + (h1 - h0) * u[:, 5]
        t0, t1 = cfg.resampling_time_range_s
        period = t0 + (t1 - t0) * u[:, 6]
        return twist, standing, heading_env, heading, period

    def step(self, dt: float) -> None:
        self.time_left -= dt
        expired = self.time_left <= 0.0
        # One set of candidates per step serves both the expired rows here and the rows
        # that reset later in the step (a row doing both just keeps the same sample).
        self._candidates = self._draw(self.env.num_envs)
        twist, standing, heading_env, heading, period = self._candidates
        self.sampled = torch.where(expired[:, None], twist, self.sampled)
        self.is_standing = torch.where(expired, standing, self.is_standing)
        self.is_heading = torch.where(expired, heading_env, self.is_heading)
        self.heading_target = torch.where(expired, heading, self.heading_target)
        self.time_left = torch.where(expired, period, self.time_left)
        self._update()

    def _update(self) -> None:
        cmd = self.sampled
        if self.cfg.heading_command:
            err = wrap_to_pi(self.heading_target - self.env.robot.heading_w)
            yaw_rate = (self.cfg.heading_stiffness * err).clamp(*self.ranges[2])
            cmd = torch.cat((cmd[:, :2], torch.where(self.is_heading, yaw_rate, cmd[:, 2]).unsqueeze(1)), dim=1)
        self.command = cmd * (~self.is_standing).unsqueeze(1)

    def reset(self, done: torch.Tensor) -> None:
        """Resample the ``done`` rows (masked: this step's candidates, no row list)."""
        if self._candidates is None:  # a reset outside step (env.reset)
            self._candidates = self._draw(self.env.num_envs)
        twist, standing, heading_env, heading, period = self._candidates
        self._candidates = None
        self.sampled = torch.where(done.unsqueeze(1), twist, self.sampled)
        self.is_standing = torch.where(done, standing, self.is_standing)
        self.is_heading = torch.where(done, heading_env, self.is_heading)
        self.heading_target = torch.where(done, heading, self.heading_target)
        self.time_left = torch.where(done, period, self.time_left)

    def refresh(self) -> None:
        """Recompute ``command`` after a reset wrote new state (heading depends on yaw)."""
        self._update()


class CommandManager:
    def __init__(self, cfg: dict[str, VelocityCommandCfg], env) -> None:
        self.terms = {name: VelocityCommand(name, c, env) for name, c in cfg.items()}
        self._list = list(self.terms.values())

    def command(self, name: str) -> torch.Tensor:
        term = self.terms.get(name)
        if term is None:
            raise ValueError(f"unknown command {name!r}; available: {list(self.terms)}")
        return term.command

    def step(self, dt: float) -> None:
        for t in self._list:
            t.step(dt)

    def reset(self, done: torch.Tensor) -> None:
        for t in self._list:
            t.reset(done)

    def refresh(self) -> None:
        for t in self._list:
            t.refresh()
