"""Convert motion files to the canonical clip, on the project's G1 model.

Three inputs are understood:

- **CSV** (Unitree / LAFAN1 retargeting): no header, one frame per row, 36 columns: root
  position xyz (m), root quaternion **xyzw**, the 29 joint positions in the model's order.
  Resampled to the output rate (positions and joints lerped, the root rotation slerped),
  velocities by differences (see ``kinematics``), body states by forward kinematics.
- **Named NPZ**: ``joint_names`` (and optionally ``body_names``) say what each column is.
  ``joint_pos`` is (T, J) or in qpos layout with the free joint first (T, 7 + J), and
  ``joint_vel`` (optional) (T, J) or (T, 6 + J) (free-joint linear then angular velocity,
  world frame); the free joint may be named in ``joint_names`` or left unnamed. The root
  pose comes from the free-joint columns or else from the root body's ``body_pos_w`` /
  ``body_quat_w``. Names are mapped onto the model: any that do not map, or a model joint
  the file lacks, is an error listing them. Body arrays covering every model body are
  reordered and kept; otherwise the body states are recomputed by forward kinematics.
- **mjlab / BeyondMimic NPZ** (no names): ``fps``, ``joint_pos``/``joint_vel`` (T, 29) in
  the model's joint order, ``body_*_w`` (T, 30, ...) in the model's body order. Kept as stored,
  once the model's FK of the root pose and joints is seen to reproduce the body poses (a file in
  another joint or body order, or with xyzw quaternions, is refused).

Every input is validated before anything is written (width, finite values, unit
quaternions, names, fps); ``import_motion`` raises ``MotionDataError`` naming the problem.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.check import FK_POS_TOL_MM, FK_ROT_TOL_RAD
from unilab.assets.motion.clip import MotionClip
from unilab.assets.motion.io import (
    ARRAY_FIELDS,
    QUAT_NORM_TOL,
    MotionDataError,
    check_finite,
    check_fps,
    check_unit_quaternions,
    clip_arrays,
    clip_from_arrays,
    read_npz,
    validate_arrays,
    write_atomically,
)

DEFAULT_CSV_FPS = 30.0
DEFAULT_OUTPUT_FPS = 50.0
CSV_COLUMNS = 36


def resample_times(num_frames: int, src_fps: float, out_fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Source frame index and blend weight of each output frame, covering the source's duration.

    With equal rates every output frame is a source frame exactly (weight 0).
    """
    duration = (num_frames - 1) / src_fps
    n_out = int(np.floor(duration * out_fps + 1e-9)) + 1
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
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise MotionDataError(f"{path}: cannot read as text ({exc})") from exc
    rows = [line for line in text.splitlines() if line.strip()]
    if not rows:
        raise MotionDataError(f"{path}: empty CSV")
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
    path = Path(path)
    src_fps = check_fps(fps, f"{path}: --fps")
    out_fps = check_fps(out_fps, f"{path}: --out-fps")
    data = read_csv(path)
    if len(data) < 2:
        raise MotionDataError(f"{path}: expected at least 2 frames, got {len(data)}")
    if not np.isfinite(data).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(data))[0])
        raise MotionDataError(f"{path}: {int((~np.isfinite(data)).sum())} non-finite values (first at row {row + 1}, "
                              f"column {col + 1})")
    root_pos, quat_xyzw, joint_pos = data[:, :3], data[:, 3:7], data[:, 7:]
    check_unit_quaternions("root quaternion (columns 4-7, xyzw)", quat_xyzw, str(path), csv_rows=True)
    root_quat = quat_xyzw[:, [3, 0, 1, 2]]
    root_quat = root_quat / np.linalg.norm(root_quat, axis=-1, keepdims=True)
    root_pos, root_quat, joint_pos = resample(root_pos, root_quat, joint_pos, src_fps, out_fps)
    check_resampled_length(len(joint_pos), len(data), src_fps, out_fps, path)
    arrays = canonical_from_root_and_joints(root_pos, root_quat, joint_pos, out_fps)
    return _finish(name or path.stem, out_fps, arrays, str(path))


def check_resampled_length(n_out: int, n_src: int, src_fps: float, out_fps: float, path: Path) -> None:
    """At least 2 output frames, checked before the differences (which need 2 frames and would crash)."""
    if n_out < 2:
        raise MotionDataError(f"{path}: {n_src} source frames at {src_fps:g} fps ({(n_src - 1) / src_fps:.3g} s) give "
                              f"{n_out} frame at --out-fps {out_fps:g}; at least 2 are needed (raise --out-fps or "
                              "give a longer source)")


def _names(z: dict[str, np.ndarray], key: str, where: str) -> tuple[str, ...] | None:
    if key not in z:
        return None
    if z[key].dtype.kind not in "US":
        raise MotionDataError(f"{where}: {key} must be an array of strings, got dtype {z[key].dtype}")
    if z[key].dtype.kind == "U":
        return tuple(str(n) for n in z[key].reshape(-1))
    # Byte strings (dtype 'S', e.g. written by h5py or Python 2): decoded, since str(b'x') is "b'x'".
    try:
        return tuple(n.decode("utf-8") for n in z[key].reshape(-1))
    except UnicodeDecodeError as exc:
        raise MotionDataError(f"{where}: {key}: byte strings that are not UTF-8 ({exc})") from exc


def _fps_of(z: dict[str, np.ndarray], fps: float | None, where: str) -> float:
    # --fps gives the rate of a source that lacks one. On a file that stores its fps it would only
    # relabel the frames and keep the stored velocities (the clip then plays at the wrong speed).
    if fps is not None and "fps" in z:
        raise MotionDataError(f"{where}: --fps {fps}: the file stores its own fps ({np.asarray(z['fps']).tolist()}); "
                              "--fps only applies to a source without one (to change the rate, re-import the "
                              "source CSV with --out-fps)")
    if fps is not None:
        return check_fps(fps, f"{where}: --fps")
    if "fps" not in z:
        raise MotionDataError(f"{where}: no 'fps' in the file; pass --fps")
    return check_fps(z["fps"], where)


def _array(z: dict[str, np.ndarray], key: str, where: str, ndim: int) -> np.ndarray:
    a = z[key]
    if a.dtype.kind not in "fiu" or a.ndim != ndim:
        raise MotionDataError(f"{where}: {key}: expected a {ndim}-D numeric array, got {a.dtype} {a.shape}")
    a = a.astype(np.float64)
    check_finite(key, a, where)
    return a


def import_named_npz(z: dict[str, np.ndarray], where: str, fps: float | None, name: str) -> MotionClip:
    model_joints, model_bodies = _model_names()
    free = kin.free_joint_name(kin.g1_model())
    joint_names = _names(z, "joint_names", where)
    body_names = _names(z, "body_names", where)
    fps = _fps_of(z, fps, where)
    # Names first: every name that does not map is listed in one error.
    named_free = bool(joint_names) and joint_names[0] == free
    hinge_names = joint_names[1:] if named_free else joint_names
    unknown_j = [n for n in hinge_names if n not in model_joints]
    unknown_b = [n for n in (body_names or ()) if n not in model_bodies]
    if unknown_j or unknown_b:
        parts = ([f"joint names {unknown_j}"] if unknown_j else []) + ([f"body names {unknown_b}"] if unknown_b else [])
        known = ([f"its joints: {list(model_joints)}"] if unknown_j else []) + \
            ([f"its bodies: {list(model_bodies)}"] if unknown_b else [])
        raise MotionDataError(f"{where}: {' and '.join(parts)} do not map onto the G1 model ({'; '.join(known)})")
    dup = sorted({n for n in hinge_names if hinge_names.count(n) > 1} |
                 {n for n in (body_names or ()) if body_names.count(n) > 1})
    if dup:
        raise MotionDataError(f"{where}: names given twice: {dup}")
    missing = [n for n in model_joints if n not in hinge_names]
    if missing:
        raise MotionDataError(f"{where}: the file lacks model joints {missing}")
    if "joint_pos" not in z:
        raise MotionDataError(f"{where}: no joint_pos")
    jp = _array(z, "joint_pos", where, 2)
    j = len(hinge_names)
    if jp.shape[1] not in (j, j + 7):
        raise MotionDataError(f"{where}: joint_pos has width {jp.shape[1]}, expected {j} (joints) or {j + 7} "
                              "(free joint first, qpos layout)")
    t = jp.shape[0]
    if t < 2:
        raise MotionDataError(f"{where}: expected at least 2 frames, got {t}")
    order = [hinge_names.index(n) for n in model_joints]
    root_pos = root_quat = root_lin = root_ang = None
    if jp.shape[1] == j + 7:
        root_pos, root_quat, joint_pos = jp[:, :3], jp[:, 3:7], jp[:, 7:][:, order]
        check_unit_quaternions("joint_pos free-joint quaternion (columns 4-7, wxyz)", root_quat, where)
    else:
        joint_pos = jp[:, order]
    joint_vel = None
    if "joint_vel" in z:
        jv = _array(z, "joint_vel", where, 2)
        if jv.shape not in ((t, j), (t, j + 6)):
            raise MotionDataError(f"{where}: joint_vel has shape {jv.shape}, expected {(t, j)} or {(t, j + 6)} "
                                  "(free joint first)")
        if jv.shape[1] == j + 6:
            root_lin, root_ang, jv = jv[:, :3], jv[:, 3:6], jv[:, 6:]
        joint_vel = jv[:, order]
    bodies = {}
    if body_names is not None:
        for key, width in (("body_pos_w", 3), ("body_quat_w", 4), ("body_lin_vel_w", 3), ("body_ang_vel_w", 3)):
            if key in z:
                a = _array(z, key, where, 3)
                if a.shape != (t, len(body_names), width):
                    raise MotionDataError(f"{where}: {key} has shape {a.shape}, expected "
                                          f"{(t, len(body_names), width)} (frames, body_names, {width})")
                bodies[key] = a
        if "body_quat_w" in bodies:
            check_unit_quaternions("body_quat_w", bodies["body_quat_w"], where)
    root = model_bodies[0]
    if root_pos is None:
        if body_names is None or root not in body_names or not {"body_pos_w", "body_quat_w"} <= set(bodies):
            raise MotionDataError(f"{where}: no root pose: give joint_pos in qpos layout (free joint first) or "
                                  f"body_pos_w/body_quat_w for the root body {root!r}")
        r = body_names.index(root)
        root_pos, root_quat = bodies["body_pos_w"][:, r], bodies["body_quat_w"][:, r]
    if root_lin is None and body_names is not None and root in body_names and \
            {"body_lin_vel_w", "body_ang_vel_w"} <= set(bodies):
        r = body_names.index(root)
        root_lin, root_ang = bodies["body_lin_vel_w"][:, r], bodies["body_ang_vel_w"][:, r]
    if body_names is not None and set(model_bodies) <= set(body_names) and len(bodies) == 4 and joint_vel is not None:
        border = [body_names.index(n) for n in model_bodies]
        arrays = {"joint_pos": joint_pos, "joint_vel": joint_vel, **{k: v[:, border] for k, v in bodies.items()}}
    else:
        arrays = canonical_from_root_and_joints(root_pos, root_quat, joint_pos, fps, root_lin, root_ang, joint_vel)
    return _finish(name, fps, arrays, where)


def import_mjlab_npz(z: dict[str, np.ndarray], where: str, fps: float | None, name: str) -> MotionClip:
    model_joints, model_bodies = _model_names()
    missing = [k for k in ARRAY_FIELDS if k not in z]
    if missing:
        raise MotionDataError(f"{where}: an unnamed (mjlab layout) clip needs {list(ARRAY_FIELDS)}; missing {missing}")
    fps = _fps_of(z, fps, where)
    arrays = {}
    for key in ARRAY_FIELDS:
        arrays[key] = _array(z, key, where, 2 if key.startswith("joint") else 3)
    j, b = len(model_joints), len(model_bodies)
    if arrays["joint_pos"].shape[1] != j or arrays["body_pos_w"].shape[1] != b:
        raise MotionDataError(f"{where}: joint_pos width {arrays['joint_pos'].shape[1]} / body count "
                              f"{arrays['body_pos_w'].shape[1]}: an unnamed clip must have the G1's {j} joints and "
                              f"{b} bodies in model order (otherwise give joint_names/body_names)")
    validate_arrays(arrays, model_joints, model_bodies, where)  # shapes and unit quaternions before FK
    check_model_order(arrays, where)
    return _finish(name, fps, arrays, where)


def check_model_order(arrays: dict[str, np.ndarray], where: str) -> None:
    """An unnamed clip's columns are only assumed to be in model order; an IsaacLab-ordered joint
    array (BeyondMimic's own files interleave left, right and waist joints) or xyzw quaternions have
    the same widths and would be kept silently scrambled. The model's FK of the stored root pose and
    joints must reproduce the stored body poses (the check's tolerances) or the file is refused.
    ``arrays`` passed ``validate_arrays``."""
    q = arrays["body_quat_w"] / np.linalg.norm(arrays["body_quat_w"], axis=-1, keepdims=True)
    fk = kin.forward_kinematics(arrays["body_pos_w"][:, 0], q[:, 0], arrays["joint_pos"])
    pos_mm = float(np.abs(fk["body_pos_w"] - arrays["body_pos_w"]).max()) * 1000.0
    rot = float(kin.quat_angle(fk["body_quat_w"], q).max())
    if pos_mm > FK_POS_TOL_MM or rot > FK_ROT_TOL_RAD:
        raise MotionDataError(f"{where}: the body poses are not the G1 model's forward kinematics of the root pose "
                              f"and joint_pos (off by up to {pos_mm:.1f} mm, {rot:.3g} rad; limit {FK_POS_TOL_MM:g} "
                              f"mm, {FK_ROT_TOL_RAD:g} rad): an unnamed clip must list joints and bodies in model "
                              "order with wxyz quaternions (otherwise give joint_names/body_names)")


def _finish(name: str, fps: float, arrays: dict[str, np.ndarray], where: str) -> MotionClip:
    model_joints, model_bodies = _model_names()
    arrays = {k: np.asarray(arrays[k], dtype=np.float64) for k in ARRAY_FIELDS}
    validate_arrays(arrays, model_joints, model_bodies, where)
    q = arrays["body_quat_w"]
    arrays["body_quat_w"] = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return clip_from_arrays(name, fps, model_joints, model_bodies, arrays)


def import_motion(path: str | os.PathLike, fps: float | None = None, out_fps: float | None = None,
                  name: str | None = None) -> MotionClip:
    """A canonical clip from a CSV, a named NPZ or an mjlab-layout NPZ (by suffix and keys).

    ``fps`` is the source rate (CSV default 30; an NPZ without its own ``fps`` needs it, one with
    it refuses it). CSV input is resampled to ``out_fps`` (default 50); NPZ input keeps its rate,
    so any ``out_fps`` given with it is refused rather than ignored.
    """
    path = Path(path)
    name = name or path.stem
    if path.suffix.lower() == ".csv":
        return import_csv(path, DEFAULT_CSV_FPS if fps is None else fps,
                          DEFAULT_OUTPUT_FPS if out_fps is None else out_fps, name)
    if path.suffix.lower() != ".npz":
        raise MotionDataError(f"{path}: unknown input type {path.suffix!r}; expected .csv or .npz")
    if out_fps is not None:
        raise MotionDataError(f"{path}: --out-fps {out_fps} applies to CSV input; an NPZ clip keeps its rate "
                              "(re-import the source CSV to change it)")
    z = read_npz(path)
    if "format_version" in z:
        from unilab.assets.motion.io import load_clip

        clip = load_clip(path)
        return import_named_npz({**clip_arrays(clip), "fps": np.float64(clip.fps),
                                 "joint_names": np.array(clip.joint_names),
                                 "body_names": np.array(clip.body_names)}, str(path), fps, name)
    if "joint_names" in z or "body_names" in z:
        if "joint_names" not in z:
            raise MotionDataError(f"{path}: body_names without joint_names; a named clip names its joints")
        return import_named_npz(z, str(path), fps, name)
    return import_mjlab_npz(z, str(path), fps, name)


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


__all__ = ["DEFAULT_CSV_FPS", "DEFAULT_OUTPUT_FPS", "QUAT_NORM_TOL", "export_csv", "import_csv", "import_motion"]
