"""Mirror functions (``MirrorCfg.func``): a term's columns under the left-right reflection.

Each returns ``(index, sign)``: for every output column, the column it comes from and +1 or
-1. The reflection is through the robot's sagittal (x-z) plane: a vector in the robot's frame
keeps x and z and negates y; an angular velocity negates x and z; left and right swap.
"""

from __future__ import annotations


def identity(env, width: int) -> tuple[list[int], list[float]]:
    """Columns the reflection leaves alone (a height, a phase)."""
    return list(range(width)), [1.0] * width


def signs(env, width: int, signs: tuple[float, ...]) -> tuple[list[int], list[float]]:
    """Columns kept in place with the given signs: (1, -1, 1) for a linear velocity or
    gravity in the robot's frame, (-1, 1, -1) for an angular velocity, (1, -1, -1) for a
    (vx, vy, yaw rate) command."""
    if len(signs) != width:
        raise ValueError(f"mirror signs: {len(signs)} signs for a term of {width} columns")
    return list(range(width)), [float(s) for s in signs]


def swapped_pairs(env, width: int) -> tuple[list[int], list[float]]:
    """Columns in (left, right) pairs, e.g. per-foot values of a two-foot sensor, each pair
    swapped: [l0, r0, l1, r1, ...] or blocks [l, r] per quantity."""
    if width % 2:
        raise ValueError(f"mirror swapped_pairs: expected an even width, got {width}")
    return [i + 1 if i % 2 == 0 else i - 1 for i in range(width)], [1.0] * width


def left_right_joints(env, width: int, left: str = "left_", right: str = "right_",
                      negate: tuple[str, ...] = ("_roll_", "_yaw_")) -> tuple[list[int], list[float]]:
    """One column per actuated joint, in the robot's joint order (joint positions,
    velocities, actions). A joint named with ``left`` takes the column of the joint named
    the same with ``right``, and back; a roll or yaw joint (a name holding one of
    ``negate``) changes sign, since reflecting flips those rotation axes."""
    names = list(env.robot.joint_names)
    if width != len(names):
        raise ValueError(f"mirror left_right_joints: the term has {width} columns, the robot {len(names)} "
                         "actuated joints; it mirrors one column per joint")
    column = {n: i for i, n in enumerate(names)}
    index, sign = [], []
    for name in names:
        other = name.replace(left, right) if left in name else name.replace(right, left)
        if other not in column:
            raise ValueError(f"mirror left_right_joints: joint {name!r} has no counterpart {other!r}")
        index.append(column[other])
        sign.append(-1.0 if any(token in name for token in negate) else 1.0)
    return index, sign


def height_scan_grid(env, width: int, scan: str) -> tuple[list[int], list[float]]:
    """One column per ray of the height scan ``scan`` (ray ``iy * nx + ix``): the reflection
    swaps the grid's rows ``iy`` and ``ny - 1 - iy``, heights keep their sign. The scan must
    sit on the sagittal plane (no sideways offset), or its reflection is another scan."""
    spec = env.robot.height_scan(scan, "mirror height_scan_grid").spec
    nx, ny = spec.grid
    if width != nx * ny:
        raise ValueError(f"mirror height_scan_grid: the term has {width} columns, scan {scan!r} {nx * ny} rays")
    if spec.offset[1] != 0.0:
        raise ValueError(f"mirror height_scan_grid: scan {scan!r} is offset sideways ({spec.offset[1]} m); its "
                         "reflection is not a scan of the same grid")
    return [(ny - 1 - k // nx) * nx + k % nx for k in range(width)], [1.0] * width
