"""Terrain generator configuration: a grid of sub-terrains, each a function of a difficulty.

Kept free of ``unilab.config`` (which refers to it from ``EnvCfg.terrain``), so the two
import in one direction only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator


class _TerrainModel(BaseModel):
    # As unilab.config.Strict; counts are StrictInt, so a bool is not read as 1 (a row count of True).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True,
                              allow_inf_nan=False)


class SubTerrainCfg(_TerrainModel):
    """One terrain type: ``func(difficulty, size, resolution, generator, **params)`` returns its
    geometry (``unilab.terrains.sub_terrains``); ``proportion`` is its share of the columns."""

    func: Callable[..., Any]
    proportion: float = Field(default=1.0, gt=0.0)
    params: dict[str, Any] = Field(default_factory=dict)


class TerrainCfg(_TerrainModel):
    """The terrain an env's scene stands on (it replaces the scene's ground geom ``replaces_geom``).

    ``num_rows`` rows are difficulty levels, from ``difficulty_range[0]`` (row 0) to
    ``difficulty_range[1]`` (the last row), evenly spaced; ``num_cols`` columns are terrain types,
    given out in order by ``sub_terrains``' proportions. Each sub-terrain is ``size`` metres, its
    heightfields sampled every ``resolution`` metres; a flat ``border_width`` frame surrounds the
    grid. Geometry is drawn from ``seed`` alone: the same config gives the same terrain.
    Envs start on levels 0 .. ``max_init_level`` (None, or past the last row: any level), spread
    evenly over the columns.
    """

    sub_terrains: dict[str, SubTerrainCfg] = Field(min_length=1)
    seed: StrictInt = Field(default=0, ge=0)
    size: tuple[float, float] = (8.0, 8.0)
    num_rows: StrictInt = Field(default=10, ge=1)
    num_cols: StrictInt = Field(default=20, ge=1)
    difficulty_range: tuple[float, float] = (0.0, 1.0)
    resolution: float = Field(default=0.1, gt=0.0)
    border_width: float = Field(default=5.0, ge=0.0)
    max_init_level: StrictInt | None = Field(default=None, ge=0)
    replaces_geom: str = "floor"

    @model_validator(mode="after")
    def _consistent(self) -> TerrainCfg:
        lo, hi = self.difficulty_range
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"difficulty_range: expected 0 <= low <= high <= 1, got {self.difficulty_range}")
        if min(self.size) <= 0.0:
            raise ValueError(f"size: expected positive sub-terrain sides (m), got {self.size}")
        if self.num_cols < len(self.sub_terrains):
            raise ValueError(f"num_cols={self.num_cols}: fewer columns than terrain types "
                             f"({sorted(self.sub_terrains)}); every type needs a column")
        return self
