"""The canonical clip file: one ``.npz`` per clip, written atomically, read without pickle.

Keys (``np.load(path, allow_pickle=False)`` reads every one):

============== ============ =====================================================
key            dtype/shape  meaning
============== ============ =====================================================
format_version int64 ()     ``CLIP_FORMAT_VERSION`` (1); other versions are refused
name           str ()       clip name
fps            float64 ()   frames per second
joint_names    str (J,)     actuated joints, the model's qpos order
body_names     str (B,)     bodies, MuJoCo order without the world body; [0] = root
joint_pos      float32 (T, J)     rad
joint_vel      float32 (T, J)     rad/s
body_pos_w     float32 (T, B, 3)  m, world frame (body frame origin)
body_quat_w    float32 (T, B, 4)  wxyz, unit
body_lin_vel_w float32 (T, B, 3)  m/s, world frame, of the body frame origin
body_ang_vel_w float32 (T, B, 3)  rad/s, world frame
============== ============ =====================================================
"""

from __future__ import annotations

import os
import uuid
import zipfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import torch
from numpy.lib import format as npy_format

from unilab.assets.motion.clip import CLIP_FORMAT_VERSION, MotionClip

ARRAY_FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
CANONICAL_KEYS = frozenset(("format_version", "name", "fps", "joint_names", "body_names") + ARRAY_FIELDS)
# A stored quaternion may be off unit length by float32 rounding (the pinned clips: 1.2e-7);
# anything beyond this is a broken rotation, not rounding.
QUAT_NORM_TOL = 1e-3
FPS_RANGE = (1.0, 1000.0)
# Bounds on what one clip may make the loaders allocate, checked on the declared sizes (NPZ member
# headers, CSV row counts, the resampled length) before anything is allocated. The longest pinned
# clip has 2,575 frames (51 s); 100,000 frames is 33 minutes at 50 fps (a canonical clip of that
# length takes 180 MB). 1 GiB of arrays read from one file covers that clip in float64 with 60
# extra source bodies; a file declaring more is refused, not read until memory runs out. A CSV of
# 100,000 rows of 36 numbers takes about 70 MB of text.
MAX_CLIP_FRAMES = 100_000
MAX_NPZ_BYTES = 2**30
MAX_CSV_BYTES = 2**27


class MotionDataError(ValueError):
    """Malformed motion input: the message names the file, the field and the problem."""


def check_fps(fps: object, where: str) -> float:
    try:
        value = float(np.asarray(fps, dtype=np.float64).reshape(-1)[0]) if np.size(fps) == 1 else None
    except (TypeError, ValueError):
        value = None
    if value is None or not np.isfinite(value) or not FPS_RANGE[0] <= value <= FPS_RANGE[1]:
        shown = np.asarray(fps).tolist() if isinstance(fps, np.ndarray) else fps
        raise MotionDataError(f"{where}: fps must be a finite number in [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}], "
                              f"got {shown!r}")
    return value


def check_finite(name: str, array: np.ndarray, where: str) -> None:
    bad = ~np.isfinite(array)
    if bad.any():
        first = [int(i) for i in np.argwhere(bad)[0]]
        at = f"frame {first[0]}" + (f", index {tuple(first[1:])}" if len(first) > 1 else "")
        raise MotionDataError(f"{where}: {name} has {int(bad.sum())} non-finite values (first at {at})")


def check_unit_quaternions(name: str, quat: np.ndarray, where: str, tol: float = QUAT_NORM_TOL,
                           csv_rows: bool = False) -> None:
    err = np.abs(np.linalg.norm(quat, axis=-1) - 1.0)
    if (err > tol).any():
        frame = int(np.argwhere(err > tol)[0][0])
        at = f"row {frame + 1}" if csv_rows else f"frame {frame}"
        raise MotionDataError(f"{where}: {name} holds non-unit quaternions (|norm - 1| up to {err.max():.3g} > "
                              f"{tol:g}, first at {at})")


def validate_arrays(arrays: dict[str, np.ndarray], joint_names: tuple[str, ...], body_names: tuple[str, ...],
                    where: str) -> None:
    """Shapes, finiteness and unit quaternions of the six canonical arrays."""
    t = arrays["joint_pos"].shape[0] if arrays["joint_pos"].ndim == 2 else -1
    j, b = len(joint_names), len(body_names)
    shapes = {"joint_pos": (t, j), "joint_vel": (t, j), "body_pos_w": (t, b, 3), "body_quat_w": (t, b, 4),
              "body_lin_vel_w": (t, b, 3), "body_ang_vel_w": (t, b, 3)}
    for field, shape in shapes.items():
        got = tuple(arrays[field].shape)
        if got != shape:
            raise MotionDataError(f"{where}: {field}: expected shape {shape} (T, {j} joints, {b} bodies), got {got}")
    if t < 2:
        raise MotionDataError(f"{where}: expected at least 2 frames, got {t}")
    for field in ARRAY_FIELDS:
        check_finite(field, arrays[field], where)
    check_unit_quaternions("body_quat_w", arrays["body_quat_w"], where)


def save_clip(clip: MotionClip, path: str | os.PathLike) -> Path:
    """Write ``clip`` as a canonical ``.npz`` atomically (a temp file in the same folder, then rename)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise MotionDataError(f"{path}: a clip file must end in .npz")
    arrays = {f: getattr(clip, f).detach().cpu().numpy().astype(np.float32) for f in ARRAY_FIELDS}
    # load_clip refuses an fps outside FPS_RANGE (MotionClip only asks for a positive one): checked
    # here too, so no file is written that cannot be read back.
    check_fps(clip.fps, f"clip {clip.name!r}")
    validate_arrays(arrays, clip.joint_names, clip.body_names, f"clip {clip.name!r}")
    write_atomically(path, lambda f: np.savez(
        f, format_version=np.int64(CLIP_FORMAT_VERSION), name=np.str_(clip.name), fps=np.float64(clip.fps),
        joint_names=np.array(clip.joint_names, dtype=np.str_), body_names=np.array(clip.body_names, dtype=np.str_),
        **arrays))
    return path


def write_atomically(path: Path, write) -> None:
    """``write(binary_file)`` into a unique sibling of ``path`` (same filesystem, so the rename
    is atomic; created with the umask's mode), flushed and fsynced, then renamed over ``path``:
    a crash leaves the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def npz_headers(path: str | os.PathLike) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each array of an ``.npz`` as its declared (shape, dtype), read from the member headers
    without loading any data; a MotionDataError if the file is not a readable ``.npz``."""
    path = Path(path)
    if not path.is_file():
        raise MotionDataError(f"{path}: no such file")
    headers = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for member in zf.namelist():
                if not member.endswith(".npy"):
                    continue
                with zf.open(member) as fp:
                    version = npy_format.read_magic(fp)
                    if version == (1, 0):
                        shape, _, dtype = npy_format.read_array_header_1_0(fp)
                    elif version == (2, 0):
                        shape, _, dtype = npy_format.read_array_header_2_0(fp)
                    else:
                        raise ValueError(f"{member}: .npy format version {version} is not read here")
                if any(n < 0 for n in shape):
                    raise ValueError(f"{member}: negative dimension in shape {shape}")
                headers[member.removesuffix(".npy")] = (tuple(int(n) for n in shape), dtype)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise MotionDataError(f"{path}: not a readable .npz ({exc})") from exc
    return headers


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MiB"


def check_declared_sizes(path: Path, headers: dict[str, tuple[tuple[int, ...], np.dtype]]) -> None:
    """Refuse, before anything is allocated, arrays declaring more than ``MAX_CLIP_FRAMES`` frames
    (the first axis of a numeric array of 2 or more axes) or more than ``MAX_NPZ_BYTES`` together."""
    total = 0
    for key, (shape, dtype) in headers.items():
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        total += nbytes
        declared = f"{key} declares shape {shape} {dtype} ({_size(nbytes)})"
        if dtype.kind in "biuf" and len(shape) >= 2 and shape[0] > MAX_CLIP_FRAMES:
            raise MotionDataError(f"{path}: {declared}: {shape[0]} frames, over the limit of {MAX_CLIP_FRAMES} "
                                  "frames a clip (MAX_CLIP_FRAMES); split the motion into shorter clips")
        if total > MAX_NPZ_BYTES:
            raise MotionDataError(f"{path}: {declared}: the arrays read from this file would take more than the "
                                  f"limit of {_size(MAX_NPZ_BYTES)} (MAX_NPZ_BYTES)")


def read_npz(path: str | os.PathLike, keys: Iterable[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays ``keys`` (default: all) of an ``.npz`` that has them, no pickled objects, once their
    declared sizes passed ``check_declared_sizes``; or a MotionDataError saying why not."""
    path = Path(path)
    headers = npz_headers(path)
    wanted = list(headers) if keys is None else [k for k in keys if k in headers]
    check_declared_sizes(path, {k: headers[k] for k in wanted})
    try:
        with zipfile.ZipFile(path) as zf:
            arrays = {}
            for key in wanted:
                with zf.open(f"{key}.npy") as fp:
                    arrays[key] = npy_format.read_array(fp, allow_pickle=False)
            return arrays
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise MotionDataError(f"{path}: not a readable .npz ({exc})") from exc


def clip_from_arrays(name: str, fps: float, joint_names: tuple[str, ...], body_names: tuple[str, ...],
                     arrays: dict[str, np.ndarray]) -> MotionClip:
    tensors = {f: torch.from_numpy(np.ascontiguousarray(arrays[f], dtype=np.float32)) for f in ARRAY_FIELDS}
    return MotionClip(name=name, fps=float(fps), joint_names=tuple(joint_names), body_names=tuple(body_names),
                      **tensors)


def check_format_version(value: np.ndarray, where: str) -> None:
    """A 0-d integer equal to ``CLIP_FORMAT_VERSION``: int() would truncate 1.7 to 1, fail on 'abc' and on
    a (2,) array, so the dtype and shape are checked before the value."""
    if value.ndim != 0 or value.dtype.kind not in "iu":
        raise MotionDataError(f"{where}: format_version must be a 0-d integer, got {value.dtype} {value.shape}")
    if int(value) != CLIP_FORMAT_VERSION:
        raise MotionDataError(f"{where}: format_version {int(value)}, this unilab reads {CLIP_FORMAT_VERSION}")


def load_clip(path: str | os.PathLike) -> MotionClip:
    """Read a canonical clip file; anything else (or a damaged one) is a MotionDataError naming the problem."""
    path = Path(path)
    where = str(path)
    missing = sorted(CANONICAL_KEYS - set(npz_headers(path)))
    if missing:
        hint = " (an unconverted clip? convert it with `unilab-motion import`)" if "format_version" in missing else ""
        raise MotionDataError(f"{where}: not a canonical clip: missing {missing}{hint}")
    z = read_npz(path, CANONICAL_KEYS)
    check_format_version(z["format_version"], where)
    fps = check_fps(z["fps"], where)
    if z["joint_names"].dtype.kind != "U" or z["body_names"].dtype.kind != "U":
        raise MotionDataError(f"{where}: joint_names and body_names must be string arrays")
    # A 0-d string, not any string array: str() of a (2,) array would name the clip "['a' 'b']".
    if z["name"].dtype.kind != "U" or z["name"].ndim != 0:
        raise MotionDataError(f"{where}: name must be a 0-d string, got {z['name'].dtype} {z['name'].shape}")
    joint_names = tuple(str(n) for n in z["joint_names"].reshape(-1))
    body_names = tuple(str(n) for n in z["body_names"].reshape(-1))
    arrays = {f: z[f] for f in ARRAY_FIELDS}
    for f in ARRAY_FIELDS:
        if arrays[f].dtype != np.float32:
            raise MotionDataError(f"{where}: {f}: expected float32, got {arrays[f].dtype}")
    validate_arrays(arrays, joint_names, body_names, where)
    return clip_from_arrays(str(z["name"]), fps, joint_names, body_names, arrays)


def clip_arrays(clip: MotionClip) -> dict[str, np.ndarray]:
    """The six arrays of a clip as float64 NumPy (for checks and exports)."""
    return {f: getattr(clip, f).detach().cpu().numpy().astype(np.float64) for f in ARRAY_FIELDS}
