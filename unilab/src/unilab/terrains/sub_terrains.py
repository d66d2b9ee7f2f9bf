"""Sub-terrain terms: ``func(difficulty, size, resolution, generator, **params) -> SubTerrain``.

``difficulty`` in [0, 1] maps each term's ``*_range`` param linearly (0: its low end, 1: its
high end); ``size`` is the sub-terrain's (x, y) in metres, ``resolution`` the heightfield's
sample spacing, ``generator`` the sub-terrain's own seeded ``torch.Generator``. Geometry is in
the sub-terrain's frame: centre at (0, 0), the surrounding ground at z = 0.

Two kinds of geometry, mjlab's split: boxes where the terrain is made of boxes (flat, stairs,
random boxes: every engine collides with boxes), a heightfield where it is a surface (slopes,
random rough: MuJoCo and MuJoCo Warp collide with heightfields). Boxes reach ``BOX_DEPTH``
below the surface they carry, so no floor is needed under them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

BOX_DEPTH = 1.0  # metres of solid under every box's top (below ground level for pits)


@dataclass(frozen=True)
class SubTerrain:
    """boxes (k, 6): centre (x, y, z) and half sizes (x, y, z), axis-aligned; heights (ny, nx) or
    None: a heightfield over the whole sub-terrain, row iy along y and column ix along x, from
    the (-x, -y) corner, samples ``size / (n - 1)`` apart; origin (3,): where an env starts
    (x, y, ground height)."""

    boxes: torch.Tensor
    heights: torch.Tensor | None
    origin: torch.Tensor


def lerp(bounds: tuple[float, float], difficulty: float) -> float:
    return float(bounds[0] + (bounds[1] - bounds[0]) * difficulty)


def box(x0: float, x1: float, y0: float, y1: float, top: float) -> list[float]:
    """A box over [x0, x1] x [y0, y1] whose top is at ``top``, BOX_DEPTH of solid under it."""
    bottom = min(top, 0.0) - BOX_DEPTH
    return [(x0 + x1) / 2, (y0 + y1) / 2, (top + bottom) / 2, (x1 - x0) / 2, (y1 - y0) / 2, (top - bottom) / 2]


def _boxes(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 6)


def _origin(z: float) -> torch.Tensor:
    return torch.tensor([0.0, 0.0, z])


def sample_grid(size: tuple[float, float], resolution: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(x (ny, nx), y (ny, nx)): heightfield sample positions covering the sub-terrain exactly."""
    nx, ny = (max(2, round(s / resolution) + 1) for s in size)
    xs = torch.linspace(-size[0] / 2, size[0] / 2, nx)
    ys = torch.linspace(-size[1] / 2, size[1] / 2, ny)
    y, x = torch.meshgrid(ys, xs, indexing="ij")
    return x, y


# ---- boxes ----------------------------------------------------------------------------------
def flat(difficulty: float, size: tuple[float, float], resolution: float, generator: torch.Generator) -> SubTerrain:
    """Level ground (the same at every difficulty)."""
    hx, hy = size[0] / 2, size[1] / 2
    return SubTerrain(_boxes([box(-hx, hx, -hy, hy, 0.0)]), None, _origin(0.0))


def pyramid_stairs(difficulty: float, size: tuple[float, float], resolution: float, generator: torch.Generator,
                   step_height_range: tuple[float, float] = (0.05, 0.23), step_width: float = 0.3,
                   platform_width: float = 3.0, border_width: float = 1.0, inverted: bool = False) -> SubTerrain:
    """Square rings of stairs around a central platform, inside a flat ``border_width`` frame.

    Step height ``lerp(step_height_range, difficulty)``; ring k (0: outermost) has its top at
    (k + 1) step heights and the platform at (n + 1), so every riser is one step height; inverted:
    the same going down (a pit). ``n = floor((half size - border - platform / 2) / step_width)``."""
    h = lerp(step_height_range, difficulty) * (-1.0 if inverted else 1.0)
    hx, hy = size[0] / 2, size[1] / 2
    n = max(0, math.floor((min(hx, hy) - border_width - platform_width / 2) / step_width + 1e-9))
    rows = [box(-hx, hx, -hy, hy, 0.0)]  # the frame (and ground under everything)
    for k in range(n + 1):
        ox, oy = hx - border_width - k * step_width, hy - border_width - k * step_width  # outer half sizes
        top = (k + 1) * h
        if k == n:  # the platform: what is left inside the last ring
            rows.append(box(-ox, ox, -oy, oy, top))
            break
        ix, iy = ox - step_width, oy - step_width
        rows += [box(-ox, ox, iy, oy, top), box(-ox, ox, -oy, -iy, top),  # the ring's +y and -y sides
                 box(ix, ox, -iy, iy, top), box(-ox, -ix, -iy, iy, top)]  # its +x and -x sides, between them
    if inverted:  # the frame stays at ground level; everything inside goes down, so no floor may cover it
        rows[0:1] = [box(-hx, hx, hy - border_width, hy, 0.0), box(-hx, hx, -hy, -hy + border_width, 0.0),
                     box(hx - border_width, hx, -hy + border_width, hy - border_width, 0.0),
                     box(-hx, -hx + border_width, -hy + border_width, hy - border_width, 0.0)]
    return SubTerrain(_boxes(rows), None, _origin((n + 1) * h))


def random_boxes(difficulty: float, size: tuple[float, float], resolution: float, generator: torch.Generator,
                 height_range: tuple[float, float] = (0.025, 0.15), grid_width: float = 0.45,
                 platform_width: float = 2.0) -> SubTerrain:
    """A grid of square boxes (stepping blocks) of side ``grid_width``, each top drawn uniformly
    in +-``lerp(height_range, difficulty)``, around a level central platform."""
    h = lerp(height_range, difficulty)
    hx, hy = size[0] / 2, size[1] / 2
    nx, ny = max(1, math.floor(size[0] / grid_width)), max(1, math.floor(size[1] / grid_width))
    wx, wy = size[0] / nx, size[1] / ny
    tops = (torch.rand(ny, nx, generator=generator) * 2.0 - 1.0) * h
    half = platform_width / 2
    rows = []
    for iy in range(ny):
        for ix in range(nx):
            x0, y0 = -hx + ix * wx, -hy + iy * wy
            on_platform = max(abs(x0 + wx / 2), abs(y0 + wy / 2)) < half
            rows.append(box(x0, x0 + wx, y0, y0 + wy, 0.0 if on_platform else float(tops[iy, ix])))
    return SubTerrain(_boxes(rows), None, _origin(0.0))


# ---- heightfields -----------------------------------------------------------------------------
def pyramid_slope(difficulty: float, size: tuple[float, float], resolution: float, generator: torch.Generator,
                  slope_range: tuple[float, float] = (0.0, 0.4), platform_width: float = 2.0,
                  inverted: bool = False) -> SubTerrain:
    """Four faces rising from the edges at gradient ``lerp(slope_range, difficulty)`` (rise over
    run: the faces' angle is its arctangent) to a level central platform; inverted: a pit."""
    slope = lerp(slope_range, difficulty) * (-1.0 if inverted else 1.0)
    x, y = sample_grid(size, resolution)
    to_edge = torch.minimum(size[0] / 2 - x.abs(), size[1] / 2 - y.abs())
    plateau = min(size) / 2 - platform_width / 2
    heights = slope * to_edge.clamp(max=plateau)
    return SubTerrain(_boxes([]), heights, _origin(slope * plateau))


def random_uniform(difficulty: float, size: tuple[float, float], resolution: float, generator: torch.Generator,
                   noise_range: tuple[float, float] = (0.02, 0.10), noise_step: float = 0.02,
                   downsampled_scale: float = 0.2) -> SubTerrain:
    """Rough ground: heights drawn uniformly from the multiples of ``noise_step`` within
    +-``lerp(noise_range, difficulty)`` every ``downsampled_scale`` metres, interpolated
    (bilinearly) to the heightfield's samples; an env starts above the highest point within
    0.5 m of the centre."""
    amplitude = lerp(noise_range, difficulty)
    levels = max(0, math.floor(amplitude / noise_step + 1e-9))
    coarse = sample_grid(size, max(downsampled_scale, resolution))[0].shape
    steps = torch.randint(-levels, levels + 1, coarse, generator=generator).float() * noise_step
    fine = sample_grid(size, resolution)
    heights = torch.nn.functional.interpolate(steps[None, None], size=fine[0].shape, mode="bilinear",
                                              align_corners=True)[0, 0]
    centre = (fine[0].abs() <= 0.5) & (fine[1].abs() <= 0.5)
    return SubTerrain(_boxes([]), heights, _origin(float(heights[centre].max())))
