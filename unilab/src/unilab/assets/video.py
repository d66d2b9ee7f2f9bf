"""Offscreen video of a scene from a stream of qpos rows (leaf I/O: MuJoCo renderer, imageio).

Used by ``unilab-play --video``. The model is rebuilt from the scene file, so frames can come
from any backend: qpos follows MuJoCo's layout on every backend (SimBackend contract).
"""

from __future__ import annotations

import os
from pathlib import Path

# Headless rendering: EGL needs no display server.
os.environ.setdefault("MUJOCO_GL", "egl")

import imageio
import mujoco

TRACKED_BODY = 1  # body 0 is the world; the floating base is the first body after it


class SceneVideo:
    """Writes an mp4: one frame per ``add_frame(qpos)`` call, camera tracking the base."""

    def __init__(self, scene: str | Path, path: Path, fps: int, width: int = 640, height: int = 480) -> None:
        self.model = mujoco.MjModel.from_xml_path(str(scene))
        # Training scenes are mesh-free: the robot is its collision geoms, kept in the normally
        # hidden geom group 3 and translucent. Draw every group, opaque.
        self.model.geom_rgba[:, 3] = 1.0
        self.scene_option = mujoco.MjvOption()
        for group in range(len(self.scene_option.geomgroup)):
            self.scene_option.geomgroup[group] = 1
        self.data = mujoco.MjData(self.model)
        self.renderer = mujoco.Renderer(self.model, height, width)
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self.camera.trackbodyid = TRACKED_BODY
        self.camera.distance = 3.0
        self.camera.elevation = -15.0
        self.camera.azimuth = 90.0
        path.parent.mkdir(parents=True, exist_ok=True)
        self.writer = imageio.get_writer(str(path), fps=max(1, fps))
        self.frames = 0

    def add_frame(self, qpos: list[float]) -> None:
        self.data.qpos[:] = qpos
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera, scene_option=self.scene_option)
        self.writer.append_data(self.renderer.render())
        self.frames += 1

    def close(self) -> None:
        self.writer.close()
        self.renderer.close()
