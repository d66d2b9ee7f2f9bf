"""Live views published by a backend."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BackendViews:
    """Live tensors on ``capabilities.device``, first dimension ``num_envs``.

    The same tensor objects stay valid for the backend's life and always show the current
    state (after ``step`` and after ``set_state``): read them, never write them; writing
    state goes through ``set_state``. Bodies are in MuJoCo order including the world body.

    qpos (N, nq), qvel (N, nv): MuJoCo qpos/qvel layout.
    body_pos_w (N, nbody, 3), body_quat_w (N, nbody, 4) wxyz: body frame origin/orientation.
    body_lin_vel_w, body_ang_vel_w (N, nbody, 3): world-frame velocity of the body ORIGIN
        (MuJoCo mjOBJ_XBODY, not the centre of mass).
    sensordata (N, nsensordata): MuJoCo sensordata layout.
    """

    qpos: torch.Tensor
    qvel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    sensordata: torch.Tensor
