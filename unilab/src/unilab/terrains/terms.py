"""Manager terms of the terrain: the level curriculum, the reset onto the terrain, a level metric.

Each reads the env's ``env.terrain`` (``TerrainPlacement``) and refuses, when it is built, an
env whose config has no terrain.
"""

from __future__ import annotations

import torch

from unilab.terms.events import uniform


def _placement(env, owner: str):
    if getattr(env, "terrain", None) is None:
        raise ValueError(f"{owner}: the env has no terrain (EnvCfg.terrain is None)")
    return env.terrain


class terrain_levels:
    """The game-inspired terrain curriculum (Isaac Lab's ``terrain_levels_vel``, Rudin et al. 2021).

    When an episode ends, its env moves one level harder if it walked farther than half a
    sub-terrain's side, and one level easier if it walked less than half of what its command
    asked for (and not farther than that side). Walked: the planar distance from where the base
    stood after the episode's first step (not from the sub-terrain's origin, which a spawn offset
    would count as walking). Asked: the commanded planar speed summed over the episode's steps (a
    command resampled mid-episode counts for the time it held), not the last command times the
    episode's length. Levels move in the reset transaction (``reset(done)``, masked: no host sync),
    before the reset events read the new origins. params: command_name."""

    def __init__(self, cfg, env) -> None:
        self.env = env
        self.terrain = _placement(env, "terrain_levels")
        self.command = env.command_manager.term(cfg.params["command_name"], "terrain_levels")
        self.asked = torch.zeros(env.num_envs, device=env.device)
        self.start = torch.zeros(env.num_envs, 2, device=env.device)
        self.half_side = 0.5 * float(self.terrain.terrain.cfg.size[0])

    def __call__(self, env) -> None:
        speed = torch.linalg.vector_norm(self.command.command[:, :2], dim=1) * env.step_dt
        # The first step of an episode (episode_length 1) starts both again, however the episode began.
        first = env.episode_length == 1
        torch.where(first, speed, self.asked + speed, out=self.asked)
        torch.where(first.unsqueeze(1), env.robot.root_pos_w[:, :2], self.start, out=self.start)

    def reset(self, done: torch.Tensor) -> None:
        env = self.env
        walked = torch.linalg.vector_norm(env.robot.root_pos_w[:, :2] - self.start, dim=1)
        up = walked > self.half_side
        down = (walked < 0.5 * self.asked) & ~up
        self.terrain.move(done, up, down, env.rng)


class reset_root_on_terrain:
    """Reset event: every row's episode start moved onto its sub-terrain's origin (x, y, and
    the ground height added to the keyframe's base height), plus a uniform planar offset in
    ``xy_range`` (m) drawn from the env's generator. Place it before events that read the base
    position; the heading is another event's (``reset_root_yaw``)."""

    def __init__(self, cfg, env) -> None:
        self.terrain = _placement(env, "reset_root_on_terrain")
        lo, hi = cfg.params.get("xy_range", (0.0, 0.0))
        self.lo, self.width = float(lo), float(hi) - float(lo)

    def __call__(self, env, txn) -> None:
        a = env.robot.root_qpos_adr
        base = txn.reset_qpos[:, a:a + 3]
        base += self.terrain.env_origins
        if self.width:
            base[:, :2] += uniform(env, (base.shape[0], 2), self.lo, self.width)


def terrain_level(env) -> torch.Tensor:
    """Metric: each env's current level (the curriculum's progress, averaged over envs)."""
    return _placement(env, "terrain_level").levels.float()
