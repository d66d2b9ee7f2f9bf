"""Process-wide Genesis set-up: one ``gs.init`` per process, and scene construction.

``gs.init`` raises when called twice and fixes the compute backend for the whole process,
so the first adapter decides it and the choice is remembered here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import torch

from unisim.errors import ContractViolation

_INIT: dict[str, Any] = {"device_type": None}


def genesis_backend_for(device: torch.device) -> Any:
    """Initialise Genesis once for ``device`` and return its backend constant."""
    import genesis as gs  # import here: it costs ~7 s and only this backend needs it

    if device.type == "cuda" and (device.index or 0) != 0:
        raise ContractViolation(
            f"device: Genesis runs on the first visible GPU only, got {device}; select the GPU with "
            "CUDA_VISIBLE_DEVICES (one process per GPU, e.g. torchrun)")
    wanted = device.type
    if _INIT["device_type"] is None:
        gs.init(backend=gs.gpu if wanted == "cuda" else gs.cpu, precision="32", logging_level="warning")
        _INIT["device_type"] = wanted
    elif _INIT["device_type"] != wanted:
        raise ContractViolation(
            f"device: Genesis was already initialised on {_INIT['device_type']} in this process and cannot "
            f"switch to {wanted}; use one Genesis device per process")
    return gs.gpu if wanted == "cuda" else gs.cpu


def build_scene(mjmodel: mujoco.MjModel, path: Path, num_envs: int, gs_backend: Any) -> tuple[Any, Any]:
    """A headless scene with the MJCF entity, timestep and gravity taken from the MjModel."""
    import genesis as gs

    scene = gs.Scene(
        show_viewer=False,
        sim_options=gs.options.SimOptions(dt=float(mjmodel.opt.timestep), substeps=1,
                                          gravity=tuple(float(g) for g in mjmodel.opt.gravity)),
    )
    robot = scene.add_entity(gs.morphs.MJCF(file=str(path)))
    scene.build(n_envs=num_envs)
    return scene, robot
