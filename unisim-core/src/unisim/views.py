"""Live views published by a backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

from unisim.contacts import ContactView
from unisim.height_scan import HeightScanView


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
    contacts: one ``ContactView`` per ``ContactSensorSpec`` requested at construction, by
        name (contract 1.3; empty when none was requested). See ``unisim.contacts`` for what
        the tensors hold after ``step`` and after ``set_state``.
    height_scans: one ``HeightScanView`` per ``HeightScanSpec`` requested at construction, by
        name (contract 1.5; empty when none was requested). See ``unisim.height_scan``.
    """

    qpos: torch.Tensor
    qvel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    sensordata: torch.Tensor
    contacts: Mapping[str, ContactView] = field(default_factory=dict, hash=False)
    height_scans: Mapping[str, HeightScanView] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "contacts", MappingProxyType(dict(self.contacts)))
        object.__setattr__(self, "height_scans", MappingProxyType(dict(self.height_scans)))
