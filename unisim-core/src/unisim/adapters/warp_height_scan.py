"""Height scans for the mjwarp adapter: three launches at the end of the publish pass.

Per requested scan (``unisim.height_scan``), on the device and inside the captured graphs:

1. ``scan_origins``: one thread per (world, ray) turns the pattern by the body's heading and
   places it at the body (the views' ``xpos``/``xquat`` just published), into one flat row of
   ``nworld x nray`` origins;
2. ``mjw.rays`` on the scan's ray scene (``unisim.mjcf.ray_scene``: a one-world model of the
   requested static geoms only, so the robot is never hit and no group filter is needed): all
   the batch's rays are one world's rays, and the scene's geoms are not copied per world;
3. ``scan_results``: the hit distance (``max_distance`` for no hit), ``hit`` and the hit z per
   (world, ray), into the arrays the views wrap.

Every world is cast each time (mujoco_warp takes no world mask); the cast is a pure function of
the body pose and the static scene, so rows nobody wrote come out as they were.
"""

from __future__ import annotations

from typing import Any

import mujoco
import mujoco_warp as mjw
import warp as wp

from unisim.height_scan import HeightScanPlan
from unisim.mjcf import ray_scene

_ALL_GROUPS = wp.types.vector(length=6, dtype=float)(-1.0, -1.0, -1.0, -1.0, -1.0, -1.0)  # no group filter


@wp.kernel
def scan_origins(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.quat),
    body: int,
    pattern: wp.array(dtype=wp.vec3),
    origins: wp.array2d(dtype=wp.vec3),
):
    world, ray = wp.tid()
    q = xquat[world, body]  # MuJoCo's (w, x, y, z) in memory order, whatever warp's quat type names them
    w, x, y, z = q[0], q[1], q[2], q[3]
    yaw = wp.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    c, s = wp.cos(yaw), wp.sin(yaw)
    p = pattern[ray]
    offset = wp.vec3(c * p[0] - s * p[1], s * p[0] + c * p[1], p[2])
    origins[0, world * pattern.shape[0] + ray] = xpos[world, body] + offset


@wp.kernel
def scan_results(
    dist: wp.array2d(dtype=float),
    origins: wp.array2d(dtype=wp.vec3),
    max_distance: float,
    distance: wp.array2d(dtype=float),
    hit: wp.array2d(dtype=wp.bool),
    hit_z: wp.array2d(dtype=float),
):
    world, ray = wp.tid()
    k = world * distance.shape[1] + ray
    d = dist[0, k]
    if d < 0.0 or d >= max_distance:  # -1: nothing on the ray
        d = max_distance
    distance[world, ray] = d
    hit[world, ray] = d < max_distance
    hit_z[world, ray] = origins[0, k][2] - d


def scan_tables(mjmodel: mujoco.MjModel, plan: HeightScanPlan, num_envs: int) -> list[dict[str, Any]]:
    """Per spec: its ray scene on the device, pattern, scratch and the outputs the views wrap."""
    tables = []
    for spec, body, geoms in zip(plan.specs, plan.body_ids, plan.geom_ids, strict=True):
        scene = ray_scene(mjmodel, geoms)
        m = mjw.put_model(scene)
        d = mjw.make_data(scene, nworld=1)
        mjw.kinematics(m, d)  # static geoms: their poses are set once
        nray = spec.num_rays
        tables.append({
            "model": m, "data": d, "body": body, "max_distance": spec.max_distance,
            "pattern": wp.array([tuple(float(v) for v in p) for p in spec.pattern().tolist()], dtype=wp.vec3),
            **scan_buffers(nray, num_envs)})
    return tables


def scan_buffers(nray: int, num_envs: int) -> dict[str, wp.array]:
    """The flat per-ray scratch of ``mjw.rays`` and the (num_envs, nray) outputs."""
    flat = num_envs * nray
    return {
        "origins": wp.zeros((1, flat), dtype=wp.vec3),
        "down": wp.full((1, flat), wp.vec3(0.0, 0.0, -1.0), dtype=wp.vec3),
        "exclude": wp.full(flat, -1, dtype=int),
        "dist": wp.zeros((1, flat), dtype=float),
        "geomid": wp.zeros((1, flat), dtype=int),
        "normal": wp.zeros((1, flat), dtype=wp.vec3),
        "distance": wp.zeros((num_envs, nray), dtype=float),
        "hit": wp.zeros((num_envs, nray), dtype=wp.bool),
        "hit_z": wp.zeros((num_envs, nray), dtype=float),
    }


def publish_scans(d: Any, tables: list[dict[str, Any]]) -> None:
    """The three launches of the module doc for every scan, from the body poses of ``d``."""
    for t in tables:
        nray = t["pattern"].shape[0]
        wp.launch(scan_origins, dim=(d.nworld, nray), inputs=[d.xpos, d.xquat, t["body"], t["pattern"]],
                  outputs=[t["origins"]])
        mjw.rays(t["model"], t["data"], t["origins"], t["down"], _ALL_GROUPS, True, t["exclude"], t["dist"],
                 t["geomid"], t["normal"])
        wp.launch(scan_results, dim=(d.nworld, nray), inputs=[t["dist"], t["origins"], t["max_distance"]],
                  outputs=[t["distance"], t["hit"], t["hit_z"]])
