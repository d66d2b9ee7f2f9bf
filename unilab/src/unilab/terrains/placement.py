"""Where each env stands on the terrain: its level (row), type (column) and spawn origin.

Owned by the env (``env.terrain``) when its config has a terrain; the curriculum moves levels,
the reset event reads origins. Every tensor is on the env device and updated in place, so a
step's graphs (``unilab.step_graphs``) see the same storage from step to step.
"""

from __future__ import annotations

import torch

from unilab.terrains.generator import Terrain


class TerrainPlacement:
    """levels (N,) int64 and types (N,) int64: each env's sub-terrain; env_origins (N, 3): its
    spawn point. origins (R, C, 3): every sub-terrain's. Envs are spread over the columns in
    contiguous blocks (env i on column floor(i * C / N)) and start on a random level up to
    ``cfg.max_init_level``, drawn from the env's generator."""

    def __init__(self, terrain: Terrain, num_envs: int, device: torch.device, rng: torch.Generator) -> None:
        self.terrain = terrain
        self.origins = terrain.origins.to(device)
        self.num_rows, self.num_cols = self.origins.shape[:2]
        self.max_level = self.num_rows - 1
        top = self.max_level if terrain.cfg.max_init_level is None else min(terrain.cfg.max_init_level, self.max_level)
        self.types = torch.arange(num_envs, device=device) * self.num_cols // num_envs
        self.levels = torch.randint(0, top + 1, (num_envs,), generator=rng, device=device)
        self.env_origins = self.origins[self.levels, self.types]

    def move(self, done: torch.Tensor, up: torch.Tensor, down: torch.Tensor, rng: torch.Generator) -> None:
        """For the ``done`` rows: one level harder where ``up``, one easier where ``down`` (not
        below 0); a row past the hardest level goes to a random one (Isaac Lab's rule, so the
        hardest rows keep being trained without piling up there). Masked, no host sync."""
        step = up.long() - down.long()
        new = self.levels + step
        anywhere = torch.randint(0, self.num_rows, new.shape, generator=rng, device=new.device)
        new = torch.where(new > self.max_level, anywhere, new.clamp_min(0))
        torch.where(done, new, self.levels, out=self.levels)
        self.env_origins.copy_(self.origins[self.levels, self.types])

    def pin(self, level: int, column: int) -> None:
        """Every env on sub-terrain (``level``, ``column``): an evaluation's fixed placement."""
        if not (0 <= level < self.num_rows and 0 <= column < self.num_cols):
            raise ValueError(f"terrain: no sub-terrain ({level}, {column}) in a {self.num_rows} x {self.num_cols} grid")
        self.levels.fill_(level)
        self.types.fill_(column)
        self.env_origins.copy_(self.origins[self.levels, self.types])

    def level_of(self, difficulty: float) -> int:
        """The row whose difficulty is nearest ``difficulty``."""
        return int((self.terrain.difficulty - difficulty).abs().argmin())

    def columns_of(self, name: str) -> list[int]:
        columns = [c for c, n in enumerate(self.terrain.names) if n == name]
        if not columns:
            raise ValueError(f"terrain: no terrain type {name!r}; types: {sorted(set(self.terrain.names))}")
        return columns
