"""Left-right reflections of a task's observation groups and actions, as signed permutations.

A task may declare, per observation term and for its actions, how the columns map when the
robot and its world are reflected through the robot's sagittal plane (``MirrorCfg``). The
env folds them into one signed permutation per group and one for the actions:
``mirrored[:, i] = sign[i] * x[:, index[i]]``. A learner can then add the mirrored copy of each
transition to its batches (FastSAC's ``symmetry_augmentation``); the env itself never
applies them. A reflection applied twice is the identity, and that is checked here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from unilab.config import MirrorCfg


@dataclass(frozen=True)
class Mirror:
    index: torch.Tensor  # (width,) int64: the source column of each output column
    sign: torch.Tensor  # (width,) float32, +1 or -1

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.index_select(-1, self.index) * self.sign


def declared_by_all(parts: dict[str, object | None], where: str) -> bool:
    """Whether ``parts`` (name -> its mirror, or None) declare a mirror: all of them or none;
    some but not all is refused, naming both sides."""
    declared = [name for name, mirror in parts.items() if mirror is not None]
    missing = [name for name, mirror in parts.items() if mirror is None]
    if declared and missing:
        raise ValueError(f"{where} {missing} declare no mirror while {declared} do; a mirror is declared by all "
                         "of them or by none")
    return bool(declared)


def build_mirror(cfg: MirrorCfg, env, width: int, where: str) -> tuple[list[int], list[float]]:
    """The (index, sign) lists a term's mirror function returns, checked for shape."""
    index, sign = cfg.func(env, width, **cfg.params)
    index, sign = [int(i) for i in index], [float(s) for s in sign]
    if len(index) != width or len(sign) != width:
        raise ValueError(f"{where}: the mirror gives {len(index)} columns and {len(sign)} signs, the term has {width}")
    if sorted(index) != list(range(width)) or any(s not in (1.0, -1.0) for s in sign):
        raise ValueError(f"{where}: a mirror must be a permutation of the term's {width} columns with signs +-1, "
                         f"got index {index} and signs {sign}")
    return index, sign


def combine(parts: list[tuple[list[int], list[float]]], frames: int, device, where: str) -> Mirror:
    """Terms' mirrors side by side (offset by the columns before them), repeated over
    ``frames`` stacked history frames; refused unless applying it twice is the identity."""
    index, sign, offset = [], [], 0
    for part_index, part_sign in parts:
        index += [offset + i for i in part_index]
        sign += part_sign
        offset += len(part_index)
    index = [f * offset + i for f in range(frames) for i in index]
    sign = sign * frames
    mirror = Mirror(torch.tensor(index, dtype=torch.int64, device=device),
                    torch.tensor(sign, dtype=torch.float32, device=device))
    twice = mirror(mirror(torch.arange(1, len(index) + 1, dtype=torch.float32, device=device)))
    if not torch.equal(twice, torch.arange(1, len(index) + 1, dtype=torch.float32, device=device)):
        raise ValueError(f"{where}: the mirror applied twice is not the identity (a reflection must undo itself)")
    return mirror
