"""A motion library's clips on the env device, flattened: one row per frame of every clip.

A frame is addressed by a global index ``start[clip] + frame``. Every per-frame quantity is
packed side by side into that frame's row of ``packed`` (columns in ``columns``), so looking up
the whole reference of all envs is one gather, with no per-env Python. Only what the task
reads is kept: the joint state, the root (free-joint body) state and the states of the
tracked bodies (the anchor among them).
"""

from __future__ import annotations

import torch

from unilab.assets.motion import MotionClip


class FrameTable:
    def __init__(self, clips: list[MotionClip], joint_names: tuple[str, ...], root_body: str,
                 tracked_bodies: tuple[str, ...], fps: float, device: torch.device, owner: str) -> None:
        if not clips:
            raise ValueError(f"{owner}: no clips")
        for clip in clips:
            if tuple(clip.joint_names) != tuple(joint_names):
                raise ValueError(f"{owner}: clip {clip.name!r} joints {list(clip.joint_names)} are not the robot's "
                                 f"actuated joints in action order {list(joint_names)}")
            missing = [b for b in (root_body, *tracked_bodies) if b not in clip.body_names]
            if missing:
                raise ValueError(f"{owner}: clip {clip.name!r} has no bodies {missing}; it has {list(clip.body_names)}")
            if clip.num_frames < 2:  # an episode is at least one step from a frame to the next
                raise ValueError(f"{owner}: clip {clip.name!r} has {clip.num_frames} frame; at least 2 are needed")
            if abs(clip.fps - fps) > 1e-6 * fps:
                raise ValueError(f"{owner}: clip {clip.name!r} is at {clip.fps:g} fps, the env steps at {fps:g} Hz; "
                                 f"re-import its source CSV at {fps:g} fps (unilab-motion import SRC.csv --out-fps "
                                 f"{fps:g} -o OUT.npz; --fps is the source's rate)")
        self.names = [c.name for c in clips]
        self.num_clips = len(clips)
        lengths = [c.num_frames for c in clips]
        self.length = torch.tensor(lengths, dtype=torch.int64, device=device)
        self.start = torch.cumsum(self.length, 0) - self.length

        def cat(get) -> torch.Tensor:
            return torch.cat([get(c) for c in clips]).to(device)

        idx = lambda c, names: [c.body_names.index(b) for b in names]
        root = lambda c: c.body_names.index(root_body)
        # Order matters to readers: joint_pos/joint_vel (the command) and body_lin_vel/body_ang_vel
        # (a twist) are adjacent, so each pair is one view of the packed row.
        parts = {
            "joint_pos": cat(lambda c: c.joint_pos), "joint_vel": cat(lambda c: c.joint_vel),
            "root_pos": cat(lambda c: c.body_pos_w[:, root(c)]), "root_quat": cat(lambda c: c.body_quat_w[:, root(c)]),
            "root_lin_vel": cat(lambda c: c.body_lin_vel_w[:, root(c)]),
            "root_ang_vel": cat(lambda c: c.body_ang_vel_w[:, root(c)]),
            "body_pos": cat(lambda c: c.body_pos_w[:, idx(c, tracked_bodies)]),
            "body_quat": cat(lambda c: c.body_quat_w[:, idx(c, tracked_bodies)]),
            "body_lin_vel": cat(lambda c: c.body_lin_vel_w[:, idx(c, tracked_bodies)]),
            "body_ang_vel": cat(lambda c: c.body_ang_vel_w[:, idx(c, tracked_bodies)]),
        }
        frames = parts["joint_pos"].shape[0]
        self.packed = torch.cat([t.reshape(frames, -1) for t in parts.values()], dim=1).contiguous()
        self.columns: dict[str, slice] = {}
        start = 0
        for name, t in parts.items():
            width = t[0].numel()
            self.columns[name] = slice(start, start + width)
            start += width

    def span(self, first: str, last: str | None = None) -> slice:
        """The packed columns from ``first`` through ``last`` (adjacent quantities: one view)."""
        return slice(self.columns[first].start, self.columns[last or first].stop)
