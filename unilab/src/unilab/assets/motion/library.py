"""A motion library: several clips of one model at one rate, sampled by weight."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from unilab.assets.motion.clip import MotionClip
from unilab.assets.motion.io import ARRAY_FIELDS, MotionDataError, load_clip


@dataclass(frozen=True)
class MotionLibrary:
    """Clips sharing joint/body names and fps; ``weights`` (K,) float32 sums to 1.

    ``stacked()`` concatenates the clips along time for batched indexing on a device:
    frame ``f`` of clip ``k`` is row ``frame_offset[k] + f``.
    """

    clips: tuple[MotionClip, ...]
    weights: torch.Tensor

    def __post_init__(self) -> None:
        if not self.clips:
            raise MotionDataError("a motion library needs at least one clip")
        # Clips here carry no path; their index tells apart clips stored under the same name.
        check_compatible(self.clips, [f"clip {k} {c.name!r}" for k, c in enumerate(self.clips)])
        if tuple(self.weights.shape) != (len(self.clips),) or self.weights.dtype != torch.float32:
            raise MotionDataError(f"weights: expected float32 ({len(self.clips)},), got {self.weights.dtype} "
                                  f"{tuple(self.weights.shape)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clips)

    @property
    def fps(self) -> float:
        return self.clips[0].fps

    @property
    def joint_names(self) -> tuple[str, ...]:
        return self.clips[0].joint_names

    @property
    def body_names(self) -> tuple[str, ...]:
        return self.clips[0].body_names

    def num_frames(self) -> torch.Tensor:
        return torch.tensor([c.num_frames for c in self.clips], dtype=torch.int64)

    def sample(self, num: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """(num,) int64 clip indices drawn with replacement by weight."""
        return torch.multinomial(self.weights, num, replacement=True, generator=generator)

    def stacked(self) -> dict[str, torch.Tensor]:
        """The six arrays concatenated over clips, plus ``frame_offset`` and ``num_frames`` (K,) int64."""
        lengths = self.num_frames()
        out = {f: torch.cat([getattr(c, f) for c in self.clips]) for f in ARRAY_FIELDS}
        out["num_frames"] = lengths
        out["frame_offset"] = torch.cumsum(lengths, 0) - lengths
        return out


def _name_diff(kind: str, names: tuple[str, ...], first: tuple[str, ...]) -> str | None:
    """What differs between a clip's names and the first clip's (None: equal), so the refusal says
    which names to fix rather than only that some differ."""
    if names == first:
        return None
    extra, lacking = [n for n in names if n not in first], [n for n in first if n not in names]
    if extra or lacking:
        return f"{kind} names only in this clip {extra}, only in the first {lacking}"
    if len(names) != len(first):
        return f"{kind} names repeated: {len(names)} names, the first has {len(first)}"
    i = next(k for k, (a, b) in enumerate(zip(names, first)) if a != b)
    return f"{kind} names in another order (first at index {i}: {names[i]!r}, the first has {first[i]!r})"


def check_compatible(clips: Sequence[MotionClip], labels: Sequence[str]) -> None:
    """Every clip has the first one's joint/body names and fps; ``labels[k]`` names clip k in the error."""
    first = clips[0]
    for clip, label in zip(clips[1:], labels[1:]):
        diffs = [d for d in (_name_diff("joint", clip.joint_names, first.joint_names),
                             _name_diff("body", clip.body_names, first.body_names)) if d]
        if diffs:
            raise MotionDataError(f"{label}: names differ from {labels[0]}: {'; '.join(diffs)}")
        if clip.fps != first.fps:
            raise MotionDataError(f"{label}: {clip.fps:g} fps, {labels[0]}: {first.fps:g} fps; "
                                  "a library has one rate (re-import the source CSVs at one --out-fps)")


def resolve_clip(item: str | os.PathLike) -> Path:
    """A clip file path, or the cached file of a pinned clip name (`unilab-motion list` prints them)."""
    from unilab.assets.motion.pinned import PINNED_CLIP_GROUPS, pinned_clip_paths

    if isinstance(item, str) and item in PINNED_CLIP_GROUPS:
        return pinned_clip_paths()[item]
    path = Path(item)
    if not path.is_file():
        raise MotionDataError(f"{item!s}: neither a clip file nor a pinned clip name "
                              f"(pinned: {sorted(PINNED_CLIP_GROUPS)})")
    return path


def load_library(paths_or_names: Sequence[str | os.PathLike] | str | os.PathLike,
                 weights: Sequence[float] | None = None) -> MotionLibrary:
    """Clips by file path or pinned name; ``weights`` per clip (default: uniform), normalized to sum 1."""
    if isinstance(paths_or_names, (str, os.PathLike)):
        paths_or_names = [paths_or_names]
    paths = [resolve_clip(item) for item in paths_or_names]
    clips = tuple(load_clip(p) for p in paths)
    if clips:  # labelled by path: two files may store the same clip name
        check_compatible(clips, [f"clip {c.name!r} ({p})" for c, p in zip(clips, paths)])
    if weights is None:
        w = [1.0] * len(clips)
    else:
        w = [float(x) for x in weights]
        if len(w) != len(clips):
            raise MotionDataError(f"weights: {len(w)} values for {len(clips)} clips")
        if any(not math.isfinite(x) or x < 0 for x in w) or sum(w) <= 0:
            raise MotionDataError(f"weights must be finite, >= 0 and not all 0, got {w}")
    total = sum(w)
    return MotionLibrary(clips, torch.tensor([x / total for x in w], dtype=torch.float32))
