"""Source NPZ motion files read into a root + joint trajectory of the G1 model, checked against
the source's own body poses (``importers`` builds the canonical clip from it).

What is read (any other key is ignored and reported):

- ``fps`` (or ``--fps`` for a file without one);
- joints: ``joint_pos`` (or ``qpos``) (T, J), or (T, 7 + J) with the free joint first (root
  xyz, quaternion wxyz); ``joint_vel`` (optional) (T, J) or (T, 6 + J) with the free joint first
  (linear then angular velocity, world frame). With ``joint_names`` the columns are mapped by
  name (the free joint may be named first; a name the model lacks, or a model joint the file
  lacks, is refused); without, J is 29: the model's order (MuJoCo depth-first: mjlab, Unitree,
  holosoma) or Isaac Lab's breadth-first order (BeyondMimic), whichever the body poses confirm;
- bodies (optional): ``body_pos_w`` / ``body_quat_w`` (wxyz) / ``body_lin_vel_w`` /
  ``body_ang_vel_w`` (T, B, ...). With ``body_names`` they are mapped by name and bodies the
  model lacks (a ``world`` body, collision-sphere links) are ignored and reported; without, B
  is the model's 30 bodies (model or Isaac Lab order, as for the joints) or 31 with the world
  body first (MuJoCo's ``xpos``);
- the root pose: the free-joint columns, else ``root_pos`` + ``root_quat`` (wxyz), else the
  root body's pose; the root velocity likewise from the ``joint_vel`` free-joint columns, else
  the root body's velocities, else (later) differences.

The forward kinematics of the root pose and joints on the project's G1 model must reproduce the
source's poses of the bodies it shares with the model within ``check``'s limits (1 mm, 1e-3 rad
= 0.057 deg): float32 storage of the model's own kinematics differs by about 0.001 mm; a joint
order other than the one stated, xyzw quaternions or another robot model are off by tens of
millimetres or degrees. A file over the limit is refused, naming the figure. A file without
body poses (qpos only) is imported unverified, and its report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.check import FK_POS_TOL_MM, FK_ROT_TOL_RAD
from unilab.assets.motion.io import MotionDataError, check_finite, check_fps, check_unit_quaternions

BODY_WIDTHS = {"body_pos_w": 3, "body_quat_w": 4, "body_lin_vel_w": 3, "body_ang_vel_w": 3}
NPZ_KEYS = frozenset(("fps", "joint_names", "body_names", "joint_pos", "qpos", "joint_vel", "root_pos", "root_quat",
                      *BODY_WIDTHS))
FK_ROT_TOL_DEG = float(np.degrees(FK_ROT_TOL_RAD))


@dataclass
class ImportReport:
    """What an import read and how far the source's body poses were from the model's FK."""

    source: str
    joint_order: str = ""
    root: str = ""
    compared_bodies: int = 0
    ignored_bodies: tuple[str, ...] = ()
    ignored_keys: tuple[str, ...] = ()
    fk_pos_mm: float | None = None
    fk_rot_deg: float | None = None
    worst: str = ""

    def lines(self) -> list[str]:
        out = [f"source: {self.source}"]
        out += [f"joints: {self.joint_order}"] if self.joint_order else []
        out += [f"root pose: {self.root}"] if self.root else []
        if self.fk_pos_mm is None:
            out.append("source body poses: none to compare with; the joint order is not verified by FK "
                       "(`unilab-motion check` tests the joint limits)")
        else:
            out.append(f"source body poses vs the model's FK: up to {self.fk_pos_mm:.3g} mm, {self.fk_rot_deg:.3g} deg "
                       f"over {self.compared_bodies} bodies ({self.worst}; limit {FK_POS_TOL_MM:g} mm, "
                       f"{FK_ROT_TOL_DEG:.3g} deg); every body state rebuilt by FK")
        if self.ignored_bodies:
            out.append(f"ignored source bodies (not in the G1 model): {list(self.ignored_bodies)}")
        if self.ignored_keys:
            out.append(f"ignored keys: {list(self.ignored_keys)}")
        return out


@dataclass
class SourceMotion:
    """A source's root + joint trajectory in the model's joint order (float64; velocities None where
    the file has none)."""

    fps: float
    root_pos: np.ndarray
    root_quat: np.ndarray
    joint_pos: np.ndarray
    joint_vel: np.ndarray | None
    root_lin_vel: np.ndarray | None
    root_ang_vel: np.ndarray | None
    report: ImportReport


@dataclass(frozen=True)
class _Layout:
    kind: str  # "name", "model" or "bfs": unnamed joint and body layouts pair by kind
    label: str
    names: tuple[str, ...]


def names_of(z: dict[str, np.ndarray], key: str, where: str) -> tuple[str, ...] | None:
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


def fps_of(z: dict[str, np.ndarray], fps: float | None, where: str) -> float:
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


def _duplicates(names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


def _joint_layouts(z: dict[str, np.ndarray], where: str) -> list[_Layout]:
    model = kin.g1_model()
    model_joints = kin.model_joint_names(model)
    names = names_of(z, "joint_names", where)
    if names is None:
        return [_Layout("model", "in the model's order (no joint_names)", model_joints),
                _Layout("bfs", "in Isaac Lab's breadth-first order (no joint_names)",
                        kin.breadth_first_joint_names(model))]
    hinges = names[1:] if names and names[0] == kin.free_joint_name(model) else names
    unknown = [n for n in hinges if n not in model_joints]
    if unknown:
        raise MotionDataError(f"{where}: joint names {unknown} do not map onto the G1 model (its joints: "
                              f"{list(model_joints)})")
    if _duplicates(hinges):
        raise MotionDataError(f"{where}: joint names given twice: {_duplicates(hinges)}")
    missing = [n for n in model_joints if n not in hinges]
    if missing:
        raise MotionDataError(f"{where}: the file lacks model joints {missing}")
    return [_Layout("name", "by name (joint_names)", hinges)]


def _body_layouts(z: dict[str, np.ndarray], where: str, frames: int) -> tuple[list[_Layout], dict[str, np.ndarray]]:
    present = [k for k in BODY_WIDTHS if k in z]
    if not present:
        return [], {}
    arrays = {k: _array(z, k, where, 3) for k in present}
    count = arrays[present[0]].shape[1]
    for key, a in arrays.items():
        if a.shape != (frames, count, BODY_WIDTHS[key]):
            raise MotionDataError(f"{where}: {key} has shape {a.shape}, expected {(frames, count, BODY_WIDTHS[key])} "
                                  f"(frames, bodies, {BODY_WIDTHS[key]})")
    if "body_quat_w" in arrays:
        check_unit_quaternions("body_quat_w", arrays["body_quat_w"], where)
    names = names_of(z, "body_names", where)
    model = kin.g1_model()
    model_bodies = kin.model_body_names(model)
    if names is not None:
        if len(names) != count:
            raise MotionDataError(f"{where}: body_names has {len(names)} names for the {count} bodies of {present[0]}")
        if _duplicates(names):
            raise MotionDataError(f"{where}: body names given twice: {_duplicates(names)}")
        return [_Layout("name", "by name (body_names)", names)], arrays
    if count == len(model_bodies):
        return [_Layout("model", "in the model's order", model_bodies),
                _Layout("bfs", "in Isaac Lab's breadth-first order", kin.breadth_first_body_names(model))], arrays
    if count == len(model_bodies) + 1:
        return [_Layout("model", "in MuJoCo's order with the world body first", ("world", *model_bodies))], arrays
    raise MotionDataError(f"{where}: {present[0]} holds {count} bodies and the file has no body_names: without "
                          f"names a file must hold the G1 model's {len(model_bodies)} bodies (or "
                          f"{len(model_bodies) + 1}, the world body first); give body_names")


def _candidates(joints: list[_Layout], bodies: list[_Layout]) -> list[tuple[_Layout, _Layout | None]]:
    if not bodies:
        return [(joints[0], None)]  # nothing to tell the orders apart: the stated (or the model's) one
    pairs = [(j, b) for j in joints for b in bodies]
    unnamed = [(j, b) for j, b in pairs if j.kind == b.kind]
    return pairs if joints[0].kind == "name" or bodies[0].kind == "name" else unnamed


def _root_pose(z: dict[str, np.ndarray], where: str, free: tuple[np.ndarray, np.ndarray, str] | None, frames: int,
               bodies: dict[str, np.ndarray], layout: _Layout | None) -> tuple[np.ndarray, np.ndarray, str]:
    """The root position, quaternion (wxyz) and where they came from (see the module docstring)."""
    if free is not None:
        return free
    if "root_pos" in z and "root_quat" in z:
        pos, quat = _array(z, "root_pos", where, 2), _array(z, "root_quat", where, 2)
        if pos.shape != (frames, 3) or quat.shape != (frames, 4):
            raise MotionDataError(f"{where}: root_pos {pos.shape} / root_quat {quat.shape}: expected "
                                  f"{(frames, 3)} / {(frames, 4)} (wxyz)")
        check_unit_quaternions("root_quat (wxyz)", quat, where)
        return pos, quat, "root_pos / root_quat"
    root = kin.model_body_names(kin.g1_model())[0]
    if layout is None or root not in layout.names or not {"body_pos_w", "body_quat_w"} <= set(bodies):
        raise MotionDataError(f"{where}: no root pose: give joint_pos in qpos layout (free joint first), "
                              f"root_pos/root_quat, or body_pos_w/body_quat_w for the root body {root!r}")
    r = layout.names.index(root)
    return bodies["body_pos_w"][:, r], bodies["body_quat_w"][:, r], f"the root body {root!r} of body_pos_w/body_quat_w"


@dataclass
class _Difference:
    pos_mm: float
    rot_deg: float
    bodies: int
    worst: str

    @property
    def ok(self) -> bool:
        return self.pos_mm <= FK_POS_TOL_MM and self.rot_deg <= FK_ROT_TOL_DEG

    def figure(self) -> str:
        return f"up to {self.pos_mm:.3g} mm and {self.rot_deg:.3g} deg ({self.worst})"


def _fk_difference(root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, bodies: dict[str, np.ndarray],
                   layout: _Layout) -> _Difference | None:
    """The source's poses of the bodies it shares with the model against the model's FK: the largest
    position distance (mm) and orientation angle (deg), and where the worst relative to its limit is."""
    model_bodies = kin.model_body_names(kin.g1_model())
    shared = [(i, model_bodies.index(n)) for i, n in enumerate(layout.names) if n in model_bodies]
    if not shared or not {"body_pos_w", "body_quat_w"} & set(bodies):
        return None
    src, mod = [i for i, _ in shared], [m for _, m in shared]
    fk = kin.forward_kinematics(root_pos, root_quat / np.linalg.norm(root_quat, axis=-1, keepdims=True), joint_pos)
    frames = joint_pos.shape[0]
    pos = np.zeros((frames, len(shared)))
    rot = np.zeros((frames, len(shared)))
    if "body_pos_w" in bodies:
        pos = np.linalg.norm(fk["body_pos_w"][:, mod] - bodies["body_pos_w"][:, src], axis=-1) * 1000.0
    if "body_quat_w" in bodies:
        rot = np.degrees(kin.quat_angle(fk["body_quat_w"][:, mod], bodies["body_quat_w"][:, src]))
    frame, k = np.unravel_index(np.argmax(np.maximum(pos / FK_POS_TOL_MM, rot / FK_ROT_TOL_DEG)), pos.shape)
    return _Difference(float(pos.max()), float(rot.max()), len(shared),
                       f"worst {layout.names[src[k]]}, frame {frame}")


def read_source_npz(z: dict[str, np.ndarray], where: str, fps: float | None, source: str,
                    ignored_keys: tuple[str, ...] = ()) -> SourceMotion:
    """The root + joint trajectory of an NPZ's arrays ``z`` (see the module docstring), verified
    against its body poses; a MotionDataError naming the problem otherwise."""
    fps = fps_of(z, fps, where)
    key = "joint_pos" if "joint_pos" in z else "qpos" if "qpos" in z else None
    if key is None:
        raise MotionDataError(f"{where}: no joint_pos (or qpos) array")
    joints = _joint_layouts(z, where)
    jp = _array(z, key, where, 2)
    frames, width, j = jp.shape[0], jp.shape[1], len(joints[0].names)
    if width not in (j, j + 7):
        hint = "" if joints[0].kind == "name" else (": without joint_names a file holds the G1's 29 joints in the "
                                                    "model's or Isaac Lab's order; give joint_names")
        raise MotionDataError(f"{where}: {key} has width {width}, expected {j} (joints) or {j + 7} (free joint first, "
                              f"qpos layout){hint}")
    if frames < 2:
        raise MotionDataError(f"{where}: expected at least 2 frames, got {frames}")
    free = None
    if width == j + 7:
        check_unit_quaternions(f"{key} free-joint quaternion (columns 4-7, wxyz)", jp[:, 3:7], where)
        free = (jp[:, :3], jp[:, 3:7], f"the free-joint columns of {key}")
    layouts, bodies = _body_layouts(z, where, frames)
    model_joints = kin.model_joint_names(kin.g1_model())
    tried = []
    for joint_layout, body_layout in _candidates(joints, layouts):
        root_pos, root_quat, root_from = _root_pose(z, where, free, frames, bodies, body_layout)
        joint_pos = jp[:, width - j:][:, [joint_layout.names.index(n) for n in model_joints]]
        diff = None if body_layout is None else _fk_difference(root_pos, root_quat, joint_pos, bodies, body_layout)
        tried.append((joint_layout, body_layout, diff))
        if diff is None or diff.ok:
            break
    else:
        raise MotionDataError(_refusal(where, tried))
    model_bodies = kin.model_body_names(kin.g1_model())
    report = ImportReport(source=source, joint_order=joint_layout.label, root=root_from, ignored_keys=ignored_keys)
    if body_layout is not None:
        report.ignored_bodies = tuple(n for n in body_layout.names if n not in model_bodies)
    if diff is not None:
        report.fk_pos_mm, report.fk_rot_deg, report.compared_bodies, report.worst = (
            diff.pos_mm, diff.rot_deg, diff.bodies, diff.worst)
        if len(joints) > 1 or len(layouts) > 1:
            report.joint_order += f", bodies {body_layout.label} (the layout the body poses confirm)"
    joint_vel, root_lin, root_ang = _velocities(z, where, frames, joint_layout, body_layout, bodies)
    return SourceMotion(fps, root_pos, root_quat, joint_pos, joint_vel, root_lin, root_ang, report)


def _velocities(z: dict[str, np.ndarray], where: str, frames: int, joint_layout: _Layout, body_layout: _Layout | None,
                bodies: dict[str, np.ndarray]) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """Joint velocities in model order and the root's (world frame), each None where the file has none."""
    joint_vel = root_lin = root_ang = None
    j = len(joint_layout.names)
    if "joint_vel" in z:
        jv = _array(z, "joint_vel", where, 2)
        if jv.shape not in ((frames, j), (frames, j + 6)):
            raise MotionDataError(f"{where}: joint_vel has shape {jv.shape}, expected {(frames, j)} or "
                                  f"{(frames, j + 6)} (free joint first)")
        if jv.shape[1] == j + 6:
            root_lin, root_ang = jv[:, :3], jv[:, 3:6]
        order = [joint_layout.names.index(n) for n in kin.model_joint_names(kin.g1_model())]
        joint_vel = jv[:, jv.shape[1] - j:][:, order]
    root = kin.model_body_names(kin.g1_model())[0]
    if root_lin is None and body_layout is not None and root in body_layout.names and \
            {"body_lin_vel_w", "body_ang_vel_w"} <= set(bodies):
        r = body_layout.names.index(root)
        root_lin, root_ang = bodies["body_lin_vel_w"][:, r], bodies["body_ang_vel_w"][:, r]
    return joint_vel, root_lin, root_ang


def _refusal(where: str, tried: list[tuple[_Layout, _Layout, _Difference]]) -> str:
    figures = "; ".join(f"{d.figure()} with joints {j.label}, bodies {b.label}" for j, b, d in tried)
    named = tried[0][0].kind == "name" or tried[0][1].kind == "name"
    hint = ("its joint_names or body_names do not say what its columns hold" if named else
            "its columns are in neither order (give joint_names and body_names)")
    return (f"{where}: the source's body poses are not the G1 model's forward kinematics of its root pose and joints: "
            f"{figures}; the limit is {FK_POS_TOL_MM:g} mm and {FK_ROT_TOL_DEG:.3g} deg. Either {hint}, its "
            "quaternions are not wxyz, or it is another robot model")


def read_npz_source(path: Path, z: dict[str, np.ndarray], all_keys: set[str], fps: float | None) -> SourceMotion:
    """``read_source_npz`` of the arrays ``z`` read from ``path``, naming the layout for the report."""
    named = [k for k in ("joint_names", "body_names") if k in z]
    has_bodies = any(k in z for k in BODY_WIDTHS)
    source = ("NPZ with " + " and ".join(named) if named else "unnamed NPZ") + \
        ("" if has_bodies else ", no body poses (qpos only)")
    return read_source_npz(z, str(path), fps, source, tuple(sorted(all_keys - NPZ_KEYS)))
