"""Convert motion files to the canonical clip, on the project's G1 model.

Two kinds of input are understood, told apart by suffix:

- **CSV** (Unitree / LAFAN1 retargeting): no header, one frame per row, 36 columns: root
  position xyz (m), root quaternion **xyzw**, the 29 joint positions in the model's order.
  Resampled to the output rate (positions and joints lerped, the root rotation slerped),
  velocities by differences (see ``kinematics``), body states by forward kinematics.
- **NPZ**: mjlab's and BeyondMimic's motion files, holosoma's (a ``world`` body and bodies the
  model lacks among them), qpos-only files, canonical clips, with or without joint and body
  names: ``sources`` reads the root and joints out of any of them and checks them against the
  file's own body poses. The clip's body states are always the model's forward kinematics of
  that root and joints, at the file's joint and root velocities (differences where it has none).

Every input is validated before anything is written (width, finite values, unit quaternions,
names, fps, and the sizes in ``io``: ``MAX_CLIP_FRAMES``, ``MAX_NPZ_BYTES``, ``MAX_CSV_BYTES``,
checked on the declared sizes before anything is allocated); ``import_motion`` raises
``MotionDataError`` naming the problem.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.clip import CLIP_FORMAT_VERSION, MotionClip
from unilab.assets.motion.io import (
    ARRAY_FIELDS,
    MAX_CLIP_FRAMES,
    MAX_CSV_BYTES,
    QUAT_NORM_TOL,
    MotionDataError,
    check_fps,
    check_unit_quaternions,
    clip_arrays,
    clip_from_arrays,
    load_clip,
    npz_headers,
    read_npz,
    validate_arrays,
    write_atomically,
)
from unilab.assets.motion.sources import NPZ_KEYS, ImportReport, read_npz_source, read_source_npz

DEFAULT_CSV_FPS = 30.0
DEFAULT_OUTPUT_FPS = 50.0
CSV_COLUMNS = 36


def resampled_length(num_frames: int, src_fps: float, out_fps: float) -> int:
    """Frames of ``num_frames`` at ``src_fps`` resampled to ``out_fps`` over the same duration."""
    return int(np.floor((num_frames - 1) / src_fps * out_fps + 1e-9)) + 1


def resample_times(num_frames: int, src_fps: float, out_fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Source frame index and blend weight of each output frame, covering the source's duration.

    With equal rates every output frame is a source frame exactly (weight 0).
    """
    n_out = resampled_length(num_frames, src_fps, out_fps)
    s = np.arange(n_out, dtype=np.float64) * (src_fps / out_fps)
    i0 = np.minimum(np.floor(s + 1e-9).astype(np.int64), num_frames - 1)
    alpha = np.clip(s - i0, 0.0, 1.0)
    return i0, alpha


def resample(root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, src_fps: float,
             out_fps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if src_fps == out_fps:
        return root_pos, root_quat, joint_pos
    i0, alpha = resample_times(len(joint_pos), src_fps, out_fps)
    i1 = np.minimum(i0 + 1, len(joint_pos) - 1)

    def lerp(x):
        return x[i0] + (x[i1] - x[i0]) * alpha[:, None]

    return lerp(root_pos), kin.quat_slerp(root_quat[i0], root_quat[i1], alpha), lerp(joint_pos)


def canonical_from_root_and_joints(root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray,
                                   fps: float, root_lin_vel: np.ndarray | None = None,
                                   root_ang_vel: np.ndarray | None = None,
                                   joint_vel: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The six canonical arrays from a root pose + joint trajectory (missing velocities by differences)."""
    dt = 1.0 / fps
    root_quat = root_quat / np.linalg.norm(root_quat, axis=-1, keepdims=True)
    root_lin_vel = kin.central_difference(root_pos, dt) if root_lin_vel is None else root_lin_vel
    root_ang_vel = kin.angular_velocity(root_quat, dt) if root_ang_vel is None else root_ang_vel
    joint_vel = kin.central_difference(joint_pos, dt) if joint_vel is None else joint_vel
    bodies = kin.forward_kinematics(root_pos, root_quat, joint_pos, root_lin_vel, root_ang_vel, joint_vel)
    return {"joint_pos": joint_pos, "joint_vel": joint_vel, **bodies}


def _model_names() -> tuple[tuple[str, ...], tuple[str, ...]]:
    model = kin.g1_model()
    return kin.model_joint_names(model), kin.model_body_names(model)


def read_csv(path: Path) -> np.ndarray:
    """The CSV's rows, refused before reading past ``MAX_CSV_BYTES`` or parsing past ``MAX_CLIP_FRAMES`` rows."""
    try:
        size = path.stat().st_size
        if size > MAX_CSV_BYTES:
            raise MotionDataError(f"{path}: {size} bytes, over the limit of {MAX_CSV_BYTES} bytes a CSV clip "
                                  "(MAX_CSV_BYTES); split the motion into shorter clips")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MotionDataError(f"{path}: cannot read as text ({exc})") from exc
    rows = [line for line in text.splitlines() if line.strip()]
    if not rows:
        raise MotionDataError(f"{path}: empty CSV")
    if len(rows) > MAX_CLIP_FRAMES:
        raise MotionDataError(f"{path}: {len(rows)} rows, over the limit of {MAX_CLIP_FRAMES} frames a clip "
                              "(MAX_CLIP_FRAMES); split the motion into shorter clips")
    data = []
    for i, line in enumerate(rows):
        cells = line.split(",")
        if len(cells) != CSV_COLUMNS:
            raise MotionDataError(f"{path}: row {i + 1} has {len(cells)} columns, expected {CSV_COLUMNS} "
                                  "(root xyz, root quaternion xyzw, 29 joints)")
        try:
            data.append([float(c) for c in cells])
        except ValueError as exc:
            raise MotionDataError(f"{path}: row {i + 1}: not a number ({exc})") from exc
    return np.asarray(data, dtype=np.float64)


def import_csv(path: str | os.PathLike, fps: float = DEFAULT_CSV_FPS, out_fps: float = DEFAULT_OUTPUT_FPS,
               name: str | None = None) -> MotionClip:
    return import_csv_with_report(path, fps, out_fps, name)[0]


def import_csv_with_report(path: str | os.PathLike, fps: float = DEFAULT_CSV_FPS,
                           out_fps: float = DEFAULT_OUTPUT_FPS, name: str | None = None
                           ) -> tuple[MotionClip, ImportReport]:
    path = Path(path)
    src_fps = check_fps(fps, f"{path}: --fps")
    out_fps = check_fps(out_fps, f"{path}: --out-fps")
    data = read_csv(path)
    if len(data) < 2:
        raise MotionDataError(f"{path}: expected at least 2 frames, got {len(data)}")
    check_resampled_length(len(data), src_fps, out_fps, path)  # before resampling allocates it
    if not np.isfinite(data).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(data))[0])
        raise MotionDataError(f"{path}: {int((~np.isfinite(data)).sum())} non-finite values (first at row {row + 1}, "
                              f"column {col + 1})")
    root_pos, quat_xyzw, joint_pos = data[:, :3], data[:, 3:7], data[:, 7:]
    check_unit_quaternions("root quaternion (columns 4-7, xyzw)", quat_xyzw, str(path), csv_rows=True)
    root_quat = quat_xyzw[:, [3, 0, 1, 2]]
    root_quat = root_quat / np.linalg.norm(root_quat, axis=-1, keepdims=True)
    root_pos, root_quat, joint_pos = resample(root_pos, root_quat, joint_pos, src_fps, out_fps)
    arrays = canonical_from_root_and_joints(root_pos, root_quat, joint_pos, out_fps)
    report = ImportReport(source=f"CSV (root xyz, quaternion xyzw, 29 joints) at {src_fps:g} fps, resampled to "
                                 f"{out_fps:g} fps", joint_order="the model's order (the CSV layout)",
                          root="columns 1-7")
    return _finish(name or path.stem, out_fps, arrays, str(path)), report


def check_resampled_length(n_src: int, src_fps: float, out_fps: float, path: Path) -> None:
    """Between 2 (the differences need 2 frames) and ``MAX_CLIP_FRAMES`` output frames, computed
    before resampling."""
    n_out = resampled_length(n_src, src_fps, out_fps)
    span = f"{n_src} source frames at --fps {src_fps:g} ({(n_src - 1) / src_fps:.4g} s) give {n_out} frames at " \
           f"--out-fps {out_fps:g}"
    if n_out < 2:
        raise MotionDataError(f"{path}: {span}; at least 2 are needed (raise --out-fps or give a longer source)")
    if n_out > MAX_CLIP_FRAMES:
        raise MotionDataError(f"{path}: {span}, over the limit of {MAX_CLIP_FRAMES} frames a clip (MAX_CLIP_FRAMES); "
                              "lower --out-fps, check --fps, or split the motion into shorter clips")


def _finish(name: str, fps: float, arrays: dict[str, np.ndarray], where: str) -> MotionClip:
    model_joints, model_bodies = _model_names()
    arrays = {k: np.asarray(arrays[k], dtype=np.float64) for k in ARRAY_FIELDS}
    validate_arrays(arrays, model_joints, model_bodies, where)
    q = arrays["body_quat_w"]
    arrays["body_quat_w"] = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return clip_from_arrays(name, fps, model_joints, model_bodies, arrays)


def import_npz(path: Path, fps: float | None, name: str) -> tuple[MotionClip, ImportReport]:
    """An NPZ in any layout ``sources`` reads (a canonical clip included), its body states rebuilt
    by FK. Only the arrays it uses are read, each once its declared size passed the limits."""
    headers = npz_headers(path)
    if "format_version" in headers:
        clip = load_clip(path)
        z = {**clip_arrays(clip), "fps": np.float64(clip.fps), "joint_names": np.array(clip.joint_names),
             "body_names": np.array(clip.body_names)}
        src = read_source_npz(z, str(path), fps, f"canonical clip (format {CLIP_FORMAT_VERSION})")
    else:
        src = read_npz_source(path, read_npz(path, NPZ_KEYS), set(headers), fps)
    arrays = canonical_from_root_and_joints(src.root_pos, src.root_quat, src.joint_pos, src.fps, src.root_lin_vel,
                                            src.root_ang_vel, src.joint_vel)
    return _finish(name, src.fps, arrays, str(path)), src.report


def import_motion_with_report(path: str | os.PathLike, fps: float | None = None, out_fps: float | None = None,
                              name: str | None = None) -> tuple[MotionClip, ImportReport]:
    """``import_motion`` and its ``ImportReport`` (what was read, ignored and how far the source's
    body poses were from the model's FK)."""
    path = Path(path)
    name = name or path.stem
    if path.suffix.lower() == ".csv":
        return import_csv_with_report(path, DEFAULT_CSV_FPS if fps is None else fps,
                                      DEFAULT_OUTPUT_FPS if out_fps is None else out_fps, name)
    if path.suffix.lower() != ".npz":
        raise MotionDataError(f"{path}: unknown input type {path.suffix!r}; expected .csv or .npz")
    if out_fps is not None:
        raise MotionDataError(f"{path}: --out-fps {out_fps} applies to CSV input; an NPZ clip keeps its rate "
                              "(re-import the source CSV to change it)")
    return import_npz(path, fps, name)


def import_motion(path: str | os.PathLike, fps: float | None = None, out_fps: float | None = None,
                  name: str | None = None) -> MotionClip:
    """A canonical clip from a CSV or an NPZ (by suffix; the NPZ layout by its keys, see ``sources``).

    ``fps`` is the source rate (CSV default 30; an NPZ without its own ``fps`` needs it, one with
    it refuses it). CSV input is resampled to ``out_fps`` (default 50); NPZ input keeps its rate,
    so any ``out_fps`` given with it is refused rather than ignored.
    """
    return import_motion_with_report(path, fps, out_fps, name)[0]


def export_csv(clip: MotionClip, path: str | os.PathLike) -> Path:
    """Write a clip's root pose and joints as a retargeting CSV (the ``import`` CSV layout).

    ``%.9g`` round-trips float32 exactly, so a re-import at the clip's rate gives the same joints.
    """
    path = Path(path)
    a = clip_arrays(clip)
    root_pos, root_quat = a["body_pos_w"][:, 0], a["body_quat_w"][:, 0]
    data = np.concatenate([root_pos, root_quat[:, [1, 2, 3, 0]], a["joint_pos"]], axis=1)
    write_atomically(path, lambda f: np.savetxt(f, data, delimiter=",", fmt="%.9g"))
    return path


__all__ = ["DEFAULT_CSV_FPS", "DEFAULT_OUTPUT_FPS", "QUAT_NORM_TOL", "ImportReport", "export_csv", "import_csv",
           "import_motion", "import_motion_with_report"]
