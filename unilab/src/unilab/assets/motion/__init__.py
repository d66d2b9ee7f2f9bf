"""Motion clips (leaf I/O): the canonical clip the tracking task reads."""

from unilab.assets.motion.clip import CLIP_FORMAT_VERSION, MotionClip

__all__ = ["CLIP_FORMAT_VERSION", "MotionClip"]
