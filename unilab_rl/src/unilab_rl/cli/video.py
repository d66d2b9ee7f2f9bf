"""MP4 of env 0's first episode for ``unilab-play --video`` (leaf module).

The only module of unilab_rl that imports an engine SDK (mujoco, for its offscreen renderer)
and imageio. The env<->runner contract carries no simulator state, so this module, part of
the composition root, reads two things from unilab directly: the task's MJCF scene
(``unilab.task_config(task).scene()``) and the backend's live qpos view (the SimBackend
contract's ``views().qpos``, MuJoCo layout on every backend). The MuJoCo model used for
drawing is rebuilt from the scene file, so this works whatever backend simulated the episode.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

# Headless rendering: EGL needs no display server (osmesa is the software fallback).
os.environ.setdefault("MUJOCO_GL", "egl")

import imageio
import mujoco

PELVIS_BODY = 1  # body 0 is the world; the floating base is the first body after it


class FirstEpisodeRecorder:
    def __init__(self, env: Any, task: str, env_overrides: dict[str, str], path: Path,
                 width: int = 640, height: int = 480, max_frames: int = 1500) -> None:
        from unilab import task_config  # composition root: unilab's public API

        scene = task_config(task, env_overrides).scene()
        self.model = mujoco.MjModel.from_xml_path(str(scene))
        # The training scene is mesh-free: the robot is its collision geoms, kept in the
        # normally hidden geom group 3 and translucent. Draw every group, opaque.
        self.model.geom_rgba[:, 3] = 1.0
        self.scene_option = mujoco.MjvOption()
        for group in range(len(self.scene_option.geomgroup)):
            self.scene_option.geomgroup[group] = 1
        self.data = mujoco.MjData(self.model)
        # Live view of the simulated state; the env object is unilab's ManagerBasedRlEnv.
        self.qpos_view = env.backend.views().qpos
        self.renderer = mujoco.Renderer(self.model, height, width)
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self.camera.trackbodyid = PELVIS_BODY
        self.camera.distance = 3.0
        self.camera.elevation = -15.0
        self.camera.azimuth = 90.0
        path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = imageio.get_writer(str(path), fps=max(1, round(1.0 / env.step_dt)))
        self.path = path
        self.max_frames = max_frames
        self.frames = 0
        self.finished = False

    def capture(self) -> None:
        self.data.qpos[:] = self.qpos_view[0].tolist()
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera, scene_option=self.scene_option)
        self.writer.append_data(self.renderer.render())
        self.frames += 1

    def after_step(self, done: torch.Tensor) -> None:
        """Called after every env step; stops when env 0's first episode ends (the view then
        already shows the reset state, so that frame is not drawn)."""
        if self.finished:
            return
        if bool(done[0]) or self.frames >= self.max_frames:
            self.finished = True
            return
        self.capture()

    def close(self) -> None:
        self.writer.close()
        self.renderer.close()
