"""The terrain generator: a ``TerrainCfg`` in, the grid's geometry and spawn origins out.

Row r (difficulty level) and column c (terrain type) of a ``num_rows x num_cols`` grid is the
sub-terrain centred at ``((r - (R - 1) / 2) * size_x, (c - (C - 1) / 2) * size_y)``: the grid is
centred on the world origin, rows along x, columns along y, with a flat border frame around it.
Each sub-terrain draws from its own ``torch.Generator`` seeded by a hash of (seed, row, column),
so a terrain is a function of its config alone: the same seed gives the same geometry, in any
process, whatever else was drawn before. Pure torch on the CPU; the MJCF is written by
``unilab.assets.terrain_mjcf``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch

from unilab.terrains.config import TerrainCfg
from unilab.terrains.sub_terrains import SubTerrain, box


@dataclass(frozen=True)
class Terrain:
    """A generated terrain, world frame.

    names: the terrain type of each column. difficulty (R,): each row's difficulty.
    origins (R, C, 3): each sub-terrain's spawn point. boxes (k, 6): every box (centre, half
    sizes). heightfields: per heightfield sub-terrain, (centre x, centre y, heights (ny, nx)),
    each covering ``cfg.size``.
    """

    cfg: TerrainCfg
    names: tuple[str, ...]
    difficulty: torch.Tensor
    origins: torch.Tensor
    boxes: torch.Tensor
    heightfields: tuple[tuple[float, float, torch.Tensor], ...]


def column_types(cfg: TerrainCfg) -> tuple[str, ...]:
    """The terrain type of each column: contiguous blocks in the order of ``cfg.sub_terrains``,
    sized by proportion (largest remainders), at least one column each."""
    names = list(cfg.sub_terrains)
    total = sum(t.proportion for t in cfg.sub_terrains.values())
    ideal = [cfg.sub_terrains[n].proportion / total * cfg.num_cols for n in names]
    counts = [max(1, math.floor(v)) for v in ideal]
    while sum(counts) < cfg.num_cols:
        k = max(range(len(names)), key=lambda i: ideal[i] - counts[i])
        counts[k] += 1
    while sum(counts) > cfg.num_cols:
        k = max((i for i in range(len(names)) if counts[i] > 1), key=lambda i: counts[i] - ideal[i])
        counts[k] -= 1
    return tuple(name for name, count in zip(names, counts, strict=True) for _ in range(count))


def row_difficulty(cfg: TerrainCfg) -> torch.Tensor:
    lo, hi = cfg.difficulty_range
    if cfg.num_rows == 1:
        return torch.tensor([lo])
    return torch.linspace(lo, hi, cfg.num_rows)


def sub_terrain_seed(seed: int, row: int, col: int) -> int:
    digest = hashlib.sha256(f"unilab-terrain:{seed}:{row}:{col}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def generate_terrain(cfg: TerrainCfg) -> Terrain:
    names = column_types(cfg)
    difficulty = row_difficulty(cfg)
    (lx, ly), rows, cols = cfg.size, cfg.num_rows, cfg.num_cols
    origins = torch.zeros(rows, cols, 3)
    boxes, heightfields = [], []
    for r in range(rows):
        for c in range(cols):
            term = cfg.sub_terrains[names[c]]
            generator = torch.Generator().manual_seed(sub_terrain_seed(cfg.seed, r, c))
            part = term.func(float(difficulty[r]), cfg.size, cfg.resolution, generator, **term.params)
            if not isinstance(part, SubTerrain):
                raise TypeError(f"terrain type {names[c]!r}: {term.func.__name__} returned {type(part).__name__}, "
                                "expected a SubTerrain")
            centre = torch.tensor([(r - (rows - 1) / 2) * lx, (c - (cols - 1) / 2) * ly, 0.0])
            origins[r, c] = part.origin + centre
            if part.boxes.numel():
                boxes.append(part.boxes + torch.cat((centre, torch.zeros(3))))
            if part.heights is not None:
                heightfields.append((float(centre[0]), float(centre[1]), part.heights))
    hx, hy, w = rows * lx / 2, cols * ly / 2, cfg.border_width
    if w > 0:  # the border frame: four boxes around the grid, at ground level
        boxes.append(torch.tensor([box(-hx - w, hx + w, hy, hy + w, 0.0), box(-hx - w, hx + w, -hy - w, -hy, 0.0),
                                   box(hx, hx + w, -hy, hy, 0.0), box(-hx - w, -hx, -hy, hy, 0.0)]))
    return Terrain(cfg=cfg, names=names, difficulty=difficulty, origins=origins,
                   boxes=torch.cat(boxes) if boxes else torch.zeros(0, 6), heightfields=tuple(heightfields))
