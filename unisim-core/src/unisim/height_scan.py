"""Height scan (contract 1.5): a grid of rays cast straight down from above a body.

A caller passes ``height_scans=[HeightScanSpec(...), ...]`` to ``create_backend``:

    HeightScanSpec("terrain", body="pelvis", size=(1.6, 1.0), resolution=0.1,
                   offset=(0.0, 0.0, 0.5), max_distance=3.0, geom_groups=(2,))

The pattern is a grid of ``nx x ny`` points, ``nx = floor(size[0] / resolution) + 1`` (``ny`` the
same with ``size[1]``), centred on the body: point ``(ix, iy)`` sits at
``((ix - (nx - 1) / 2) * resolution, (iy - (ny - 1) / 2) * resolution)``. Ray ``k = iy * nx + ix``
(x fastest, both from the negative side) starts at

    origin_w = body_pos_w + Rz(yaw) @ (x_k + offset[0], y_k + offset[1], 0) + (0, 0, offset[2])

where ``yaw = atan2(2 (w z + x y), 1 - 2 (y^2 + z^2))`` is the heading of the body's quaternion:
the pattern turns with the body's heading and ignores its roll and pitch (Isaac Lab's
``ray_alignment="yaw"``). Every ray points straight down, world ``(0, 0, -1)``.

What a ray sees: the terrain only. The spec selects static geoms (geoms of bodies welded to the
world, which no state moves) by MJCF geom group (``geom_groups``, each in 0..5) or by name
(``geoms``); exactly one of the two. Every other geom, the robot's own bodies included, is
invisible to the rays, whatever its group, visibility or collision flags.

``views().height_scans[name]`` is then a ``HeightScanView`` of live tensors on the backend's
device, one column per ray:
- ``distance`` (N, nray) float32: the distance along the ray from its origin to the first
  surface hit, in [0, max_distance). **No hit** (nothing nearer than ``max_distance``) reads
  exactly ``max_distance``;
- ``hit`` (N, nray) bool: ``distance < max_distance``;
- ``hit_z_w`` (N, nray) float32: the world z of the hit point, ``origin_z - distance`` (the
  terrain height under the ray); for a miss, the z of the ray's end, ``origin_z - max_distance``.

When they hold it, on every backend that declares ``Feature.HEIGHT_SCAN``: the state the other
views show. After ``step`` the scan is cast once, at the state physics reached (after the last
substep, with the other views); after ``set_state``/``set_state_where`` the written rows are
cast again at their new state (a ray cast is a function of the body pose and the static terrain,
no physics), so they are authoritative on return; other rows are untouched. At construction: the
initial state's scan.

Engine-free: names are resolved against a compiled model by the adapters (``unisim.mjcf``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from unisim.errors import ContractViolation
from unisim.requests import named_specs

GEOM_GROUPS = range(6)  # MuJoCo's geom groups a ray filter can name


@dataclass(frozen=True)
class HeightScanSpec:
    """A request for a height scan on a named body, made when the backend is built.

    Attributes:
        name: key of the view in ``views().height_scans``.
        body: the body the pattern follows (position and heading); not the world body.
        size: (x, y) extent of the grid in metres, in the body's heading frame (>= 0).
        resolution: spacing of the grid's points in metres (> 0).
        offset: (x, y, z) of the pattern's centre from the body origin, heading frame; z is
            how far above the body the rays start.
        max_distance: rays see surfaces nearer than this (metres, > 0); farther is no hit.
        geom_groups: the MJCF geom groups (0..5) of the static geoms the rays see.
        geoms: or the names of the static geoms the rays see.
    """

    name: str
    body: str
    size: tuple[float, float] = (1.6, 1.0)
    resolution: float = 0.1
    offset: tuple[float, float, float] = (0.0, 0.0, 0.5)
    max_distance: float = 3.0
    geom_groups: tuple[int, ...] = ()
    geoms: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        where = f"HeightScanSpec({self.name!r})"
        if not isinstance(self.name, str) or not self.name:
            raise ContractViolation(f"HeightScanSpec.name: expected a non-empty str, got {self.name!r}")
        if not isinstance(self.body, str) or not self.body:
            raise ContractViolation(f"{where}.body: expected a body name, got {self.body!r}")
        object.__setattr__(self, "size", _numbers(where, "size", self.size, 2, low=0.0))
        object.__setattr__(self, "offset", _numbers(where, "offset", self.offset, 3))
        for arg in ("resolution", "max_distance"):
            (value,) = _numbers(where, arg, (getattr(self, arg),), 1, low=0.0)
            if value <= 0.0:
                raise ContractViolation(f"{where}.{arg}: expected a finite number > 0, got {value!r}")
            object.__setattr__(self, arg, value)
        groups, names = self.geom_groups, self.geoms
        if isinstance(groups, (int, str)) or not isinstance(groups, (tuple, list)) or not all(
                isinstance(g, int) and not isinstance(g, bool) and g in GEOM_GROUPS for g in groups):
            raise ContractViolation(f"{where}.geom_groups: expected a tuple of MJCF geom groups in 0..5, got {groups!r}")
        if isinstance(names, str) or not isinstance(names, (tuple, list)) \
                or not all(isinstance(n, str) and n for n in names):
            raise ContractViolation(f"{where}.geoms: expected a tuple of geom names, got {names!r}")
        for arg, value in (("geom_groups", groups), ("geoms", names)):
            if len(set(value)) != len(value):
                raise ContractViolation(f"{where}.{arg}: entries repeat in {list(value)}")
        if bool(groups) == bool(names):
            raise ContractViolation(f"{where}: give exactly one of geom_groups and geoms (what the rays see: the "
                                    f"terrain's static geoms), got geom_groups={tuple(groups)}, geoms={tuple(names)}")
        object.__setattr__(self, "geom_groups", tuple(groups))
        object.__setattr__(self, "geoms", tuple(names))

    @property
    def grid(self) -> tuple[int, int]:
        """(nx, ny): points along the heading frame's x and y."""
        return tuple(math.floor(s / self.resolution + 1e-9) + 1 for s in self.size)

    @property
    def num_rays(self) -> int:
        nx, ny = self.grid
        return nx * ny

    def pattern(self) -> torch.Tensor:
        """(nray, 3) float64: each ray's origin in the body's heading frame, relative to the body
        origin (grid point + offset), ray ``k = iy * nx + ix``."""
        nx, ny = self.grid
        xs = (torch.arange(nx, dtype=torch.float64) - (nx - 1) / 2) * self.resolution + self.offset[0]
        ys = (torch.arange(ny, dtype=torch.float64) - (ny - 1) / 2) * self.resolution + self.offset[1]
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")  # row iy, column ix: x varies fastest when flattened
        return torch.stack((gx.flatten(), gy.flatten(), torch.full((nx * ny,), self.offset[2], dtype=torch.float64)),
                           dim=1)


def _numbers(where: str, arg: str, value: object, n: int, low: float | None = None) -> tuple[float, ...]:
    ok = isinstance(value, (tuple, list)) and len(value) == n and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and (low is None or v >= low)
        for v in value)
    if not ok:
        bound = f" >= {low}" if low is not None else ""
        shape = "a finite number" if n == 1 else f"{n} finite numbers"
        raise ContractViolation(f"{where}.{arg}: expected {shape}{bound}, got {value!r}")
    return tuple(float(v) for v in value)


@dataclass(frozen=True)
class HeightScanView:
    """Live tensors of one ``HeightScanSpec`` (see the module docstring).

    distance (N, nray) float32: distance from each ray's origin to the first surface, or
        ``spec.max_distance`` where nothing is hit (the no-hit value).
    hit (N, nray) bool: ``distance < spec.max_distance``.
    hit_z_w (N, nray) float32: world z of the hit (the terrain height), or of the ray's end.
    Column k is ray ``k = iy * nx + ix`` of ``spec.grid``; ``body_id`` indexes the body views.
    """

    spec: HeightScanSpec
    body_id: int
    distance: torch.Tensor
    hit: torch.Tensor
    hit_z_w: torch.Tensor


@dataclass(frozen=True)
class HeightScanPlan:
    """A validated request resolved against a model: per spec, its body and target geoms."""

    specs: tuple[HeightScanSpec, ...]
    body_ids: tuple[int, ...]
    geom_ids: tuple[tuple[int, ...], ...]  # per spec: the static geoms its rays see (compiled order)

    def views(self, distance: list[torch.Tensor], hit: list[torch.Tensor],
              hit_z_w: list[torch.Tensor]) -> dict[str, HeightScanView]:
        return {spec.name: HeightScanView(spec=spec, body_id=b, distance=dist, hit=h, hit_z_w=z)
                for spec, b, dist, h, z in zip(self.specs, self.body_ids, distance, hit, hit_z_w, strict=True)}


def yaw_frame_origins(body_pos: torch.Tensor, body_quat: torch.Tensor, pattern: torch.Tensor) -> torch.Tensor:
    """(N, nray, 3) ray origins: ``body_pos`` (N, 3) + Rz(heading of ``body_quat`` (N, 4) wxyz)
    applied to ``pattern`` (nray, 3) (x, y turned, z kept): the module docstring's formula, for
    adapters whose publication is torch or NumPy-backed torch."""
    w, x, y, z = body_quat.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    c, s = torch.cos(yaw).unsqueeze(1), torch.sin(yaw).unsqueeze(1)
    px, py, pz = pattern.to(body_pos.dtype).unbind(-1)
    return torch.stack((body_pos[:, 0:1] + c * px - s * py, body_pos[:, 1:2] + s * px + c * py,
                        body_pos[:, 2:3] + pz.expand(body_pos.shape[0], -1)), dim=-1)


def check_height_requests(height_scans: object) -> tuple[HeightScanSpec, ...]:
    """The model-independent part of a request: a sequence of specs with distinct names."""
    return named_specs(height_scans, HeightScanSpec, "height_scans", "scan")
