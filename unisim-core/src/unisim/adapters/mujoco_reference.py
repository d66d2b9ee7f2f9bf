"""MuJoCo C references the conformance suite checks adapters against (engine code).

Written apart from every adapter's own path, so that an adapter's mistake (a heading not
applied, an offset's sign) cannot cancel out in the comparison: the pattern is laid out by
loops from the spec's numbers, the heading read from ``mj_kinematics``'s body quaternion, and
each ray cast by ``mj_ray`` on the full model with a group mask and the scanning body excluded.
"""

from __future__ import annotations

import math
from pathlib import Path

import mujoco
import numpy as np

from unisim.height_scan import HeightScanSpec


def mj_ray_height_scan(model_path: str | Path, qpos: np.ndarray, spec: HeightScanSpec) -> tuple[np.ndarray, np.ndarray]:
    """(distance, hit_z_w), each (n, nray), of ``spec`` at each row of ``qpos`` (n, nq).

    The rays see the geoms of ``spec.geom_groups`` except those of ``spec.body``: the reference
    for a scene whose other moving geoms stay out of the rays' way."""
    m = mujoco.MjModel.from_xml_path(str(model_path))
    d = mujoco.MjData(m)
    body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, spec.body)
    groups = np.array([1 if g in spec.geom_groups else 0 for g in range(6)], dtype=np.uint8)
    nx = int(spec.size[0] / spec.resolution + 1e-9) + 1
    ny = int(spec.size[1] / spec.resolution + 1e-9) + 1
    geomid = np.zeros(1, dtype=np.int32)
    distance = np.zeros((qpos.shape[0], nx * ny))
    hit_z = np.zeros_like(distance)
    for row in range(qpos.shape[0]):
        d.qpos[:] = qpos[row]
        mujoco.mj_kinematics(m, d)
        w, x, y, z = d.xquat[body]
        heading = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        c, s = math.cos(heading), math.sin(heading)
        for iy in range(ny):
            for ix in range(nx):
                lx = (ix - (nx - 1) / 2) * spec.resolution + spec.offset[0]
                ly = (iy - (ny - 1) / 2) * spec.resolution + spec.offset[1]
                origin = d.xpos[body] + np.array([c * lx - s * ly, s * lx + c * ly, spec.offset[2]])
                hit = mujoco.mj_ray(m, d, origin, np.array([0.0, 0.0, -1.0]), groups, 1, body, geomid)
                k = iy * nx + ix
                distance[row, k] = hit if 0.0 <= hit < spec.max_distance else spec.max_distance
                hit_z[row, k] = origin[2] - distance[row, k]
    return distance, hit_z
