"""MP4 of env 0's first episode for ``unilab-play --video`` (part of the composition root).

The env<->runner contract carries no simulator state, so this module reads two things from
unilab directly: the task's MJCF scene (``unilab.task_config(task).scene()``) and the
backend's live qpos view (the SimBackend contract's ``views().qpos``, MuJoCo layout on every
backend). Drawing is unilab's leaf I/O (``unilab.assets.video``): engine SDKs stay out of
unilab_rl.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


class FirstEpisodeRecorder:
    def __init__(self, env: Any, task: str, env_overrides: dict[str, str], path: Path,
                 width: int = 640, height: int = 480, max_frames: int = 1500) -> None:
        from unilab.assets.video import SceneVideo

        from unilab import task_config

        scene = task_config(task, env_overrides).scene()
        self.video = SceneVideo(scene, path, fps=round(1.0 / env.step_dt), width=width, height=height)
        self.qpos_view = env.backend.views().qpos  # live view; env is unilab's ManagerBasedRlEnv
        self.path = path
        self.max_frames = max_frames
        self.finished = False

    @property
    def frames(self) -> int:
        return self.video.frames

    def capture(self) -> None:
        self.video.add_frame(self.qpos_view[0].tolist())

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
        self.video.close()
