"""Warp kernels, buffer sizing and device helpers shared by the mjwarp adapter and the benchmark.

Kept apart from the adapter so the benchmark's raw baseline and the adapter compile the
very same kernels (a fair comparison) and the adapter module stays about the contract.
"""

from __future__ import annotations

import mujoco
import torch
import warp as wp

wp.config.quiet = True  # the init banner is noise in test and training logs


@wp.kernel
def body_origin_velocity(
    cvel: wp.array2d(dtype=wp.spatial_vector),
    xpos: wp.array2d(dtype=wp.vec3),
    subtree_com: wp.array2d(dtype=wp.vec3),
    body_rootid: wp.array(dtype=wp.int32),
    lin_vel: wp.array2d(dtype=wp.vec3),
    ang_vel: wp.array2d(dtype=wp.vec3),
):
    """World velocity of each body ORIGIN (MuJoCo mjOBJ_XBODY) from cvel.

    cvel is a spatial velocity [omega, v] expressed at subtree_com[rootid[b]]; shifting the
    linear part to the body origin is v + omega x (xpos - subtree_com[root]); unisim-core/tests/test_cross_backend.py
    compares these views with mj_objectVelocity of MuJoCo.
    """
    world, body = wp.tid()
    v = cvel[world, body]
    omega = wp.vec3(v[0], v[1], v[2])
    lin = wp.vec3(v[3], v[4], v[5])
    offset = xpos[world, body] - subtree_com[world, body_rootid[body]]
    lin_vel[world, body] = lin + wp.cross(omega, offset)
    ang_vel[world, body] = omega


def warp_device(device: torch.device) -> str:
    """The warp device name of a resolved torch device."""
    if device.type == "cuda":
        return f"cuda:{0 if device.index is None else device.index}"
    return "cpu"


def torch_view(array: wp.array, num_envs: int, *tail: int) -> torch.Tensor:
    """Zero-copy torch view of a warp array; an empty one gets an empty torch tensor.

    wp.to_torch refuses zero-size arrays (e.g. ``act`` when na == 0, sensordata with no
    sensors), and such a view never changes, so an empty tensor is an exact stand-in.
    """
    if array.size == 0:
        return torch.zeros((num_envs, *tail), dtype=torch.float32, device=str(array.device))
    return wp.to_torch(array)


_SIZES = [(2 + i % 2) * 2 ** (i // 2 + 3) for i in range(19)]  # 16, 24, 32, 48, ... mujoco_warp's steps


def _round_up(n: int) -> int:
    return next((s for s in _SIZES if s >= n), n)


def default_buffer_sizes(mjmodel: mujoco.MjModel) -> tuple[int, int]:
    """(nconmax per world, njmax) for a model: twice what its resting poses need.

    mujoco_warp's own defaults (48 contacts, 64 constraint rows for a model without height
    fields) overflow on a standing G1 (28 foot contacts x 4 pyramid rows). We measure ncon
    and nefc with MuJoCo C at qpos0 and at every keyframe, double them for falls and
    stumbles, keep at least mujoco_warp's defaults and round up to its size steps.
    """
    data = mujoco.MjData(mjmodel)
    ncon, nefc = 0, 0
    for key in range(-1, mjmodel.nkey):
        if key < 0:
            mujoco.mj_resetData(mjmodel, data)
        else:
            mujoco.mj_resetDataKeyframe(mjmodel, data, key)
        mujoco.mj_forward(mjmodel, data)
        ncon, nefc = max(ncon, data.ncon), max(nefc, data.nefc)
    return _round_up(max(48, 2 * ncon)), _round_up(max(64, 2 * nefc))
