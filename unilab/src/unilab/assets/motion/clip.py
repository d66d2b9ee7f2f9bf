"""The canonical motion clip: what the tracking task reads, whatever a clip was imported from.

A clip is a reference trajectory of the project's G1 model at a fixed rate: joint positions
and velocities in the model's actuated-joint order (``joint_names``) and the world-frame
states of its bodies in MuJoCo body order without the world body (``body_names``);
quaternions wxyz. The root (free-joint) body is ``body_names[0]``: its pose and velocity
are the free joint's state. Tensors are float32 on the CPU; the task moves them to its
device once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

CLIP_FORMAT_VERSION = 1


@dataclass(frozen=True)
class MotionClip:
    name: str
    fps: float
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    joint_pos: torch.Tensor  # (T, J)
    joint_vel: torch.Tensor  # (T, J)
    body_pos_w: torch.Tensor  # (T, B, 3)
    body_quat_w: torch.Tensor  # (T, B, 4) wxyz
    body_lin_vel_w: torch.Tensor  # (T, B, 3)
    body_ang_vel_w: torch.Tensor  # (T, B, 3)

    def __post_init__(self) -> None:
        t, j, b = self.joint_pos.shape[0], len(self.joint_names), len(self.body_names)
        expected = {"joint_pos": (t, j), "joint_vel": (t, j), "body_pos_w": (t, b, 3), "body_quat_w": (t, b, 4),
                    "body_lin_vel_w": (t, b, 3), "body_ang_vel_w": (t, b, 3)}
        for field, shape in expected.items():
            value = getattr(self, field)
            if not isinstance(value, torch.Tensor) or value.dtype != torch.float32 or tuple(value.shape) != shape:
                got = (value.dtype, tuple(value.shape)) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"clip {self.name!r}: {field}: expected float32 {shape}, got {got}")
        if t < 2:
            raise ValueError(f"clip {self.name!r}: expected at least 2 frames, got {t}")
        if not (self.fps > 0 and self.fps < float("inf")):
            raise ValueError(f"clip {self.name!r}: fps must be a positive finite number, got {self.fps!r}")

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    @property
    def duration_s(self) -> float:
        return (self.num_frames - 1) / self.fps
