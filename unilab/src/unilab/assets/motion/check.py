"""Is a canonical clip a consistent trajectory of the project's G1 model? (``unilab-motion check``)

Each item is measured and compared with a threshold. The thresholds sit between what the 18
pinned clips measure and what a corrupted clip gives (figures in docs/tasks.md):

- names: ``joint_names`` / ``body_names`` equal the model's (order included);
- fps in [1, 1000]; every value finite; quaternion norms within 1e-3 of 1;
- joint limits: no joint beyond the model's range by more than 0.01 rad (retargeting
  round-off; the pinned clips stay inside);
- velocities vs finite differences of the positions (joint_vel vs joint_pos, body linear
  velocity vs body positions, body angular velocity vs SO(3) differences of body
  orientations, the ``kinematics`` conventions): relative RMS deviation
  ``rms(v - fd) / max(rms(fd), 0.05)`` at most 0.05 for each. The pinned clips give at most
  0.014; a clip labelled at the wrong rate (60 for 50 fps) gives 0.167, velocities shifted by
  one frame 0.09-0.4, forward instead of central differences 0.16-0.24. The max absolute
  deviation is reported alongside (body linear velocities of fast clips legitimately
  differ from central differences of positions by up to 0.3 m/s: they are rigid-body
  velocities, exact at the frame, while the difference averages over two frames);
- forward kinematics of the stored root pose + joint positions reproduces the stored body
  poses within 1 mm and 1e-3 rad (the pinned clips: 0.002 mm, 7e-7 rad).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.clip import MotionClip
from unilab.assets.motion.io import FPS_RANGE, QUAT_NORM_TOL, clip_arrays

JOINT_LIMIT_TOL = 0.01  # rad
VELOCITY_REL_TOL = 0.05
VELOCITY_REL_FLOOR = 0.05  # rad/s or m/s: the RMS below which a clip counts as still
FK_POS_TOL_MM = 1.0
FK_ROT_TOL_RAD = 1e-3


@dataclass
class CheckItem:
    name: str
    ok: bool
    value: str
    limit: str


@dataclass
class CheckReport:
    clip: str
    items: list[CheckItem] = field(default_factory=list)
    measures: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(item.ok for item in self.items)

    def add(self, name: str, ok: bool, value: str, limit: str) -> None:
        self.items.append(CheckItem(name, bool(ok), value, limit))

    def format(self) -> str:
        width = max(len(i.name) for i in self.items)
        lines = [f"clip {self.clip}"]
        for i in self.items:
            lines.append(f"  {'ok  ' if i.ok else 'FAIL'} {i.name:<{width}}  {i.value}  (limit: {i.limit})")
        lines.append("PASS" if self.ok else "FAIL: " + ", ".join(i.name for i in self.items if not i.ok))
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"clip": self.clip, "ok": self.ok, "measures": self.measures,
                "items": [vars(i) for i in self.items]}


def _rel_dev(v: np.ndarray, fd: np.ndarray) -> tuple[float, float]:
    dev = v - fd
    rms_fd = float(np.sqrt(np.mean(fd**2)))
    return float(np.sqrt(np.mean(dev**2))) / max(rms_fd, VELOCITY_REL_FLOOR), float(np.abs(dev).max())


def check_clip(clip: MotionClip) -> CheckReport:
    report = CheckReport(clip.name)
    model = kin.g1_model()
    joints, bodies = kin.model_joint_names(model), kin.model_body_names(model)
    names_ok = clip.joint_names == joints and clip.body_names == bodies
    report.add("names", names_ok, f"{len(clip.joint_names)} joints, {len(clip.body_names)} bodies",
               f"the G1 model's {len(joints)} joints and {len(bodies)} bodies in model order")
    fps_ok = FPS_RANGE[0] <= clip.fps <= FPS_RANGE[1]
    report.add("fps", fps_ok, f"{clip.fps:g} ({clip.num_frames} frames, {clip.duration_s:.2f} s)",
               f"[{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}]")
    a = clip_arrays(clip)
    bad = {k: int((~np.isfinite(v)).sum()) for k, v in a.items()}
    finite = not any(bad.values())
    report.add("finite", finite, "all finite" if finite else ", ".join(f"{k}: {n}" for k, n in bad.items() if n),
               "no NaN/inf")
    if not (finite and names_ok and fps_ok):
        return report  # the remaining measures are meaningless on such a clip
    qerr = float(np.abs(np.linalg.norm(a["body_quat_w"], axis=-1) - 1.0).max())
    report.measures["quat_norm_error"] = qerr
    report.add("unit quaternions", qerr <= QUAT_NORM_TOL, f"max |norm - 1| {qerr:.2e}", f"{QUAT_NORM_TOL:g}")

    ranges = kin.hinge_ranges(model)
    over = np.maximum(ranges[:, 0] - a["joint_pos"], a["joint_pos"] - ranges[:, 1])  # > 0 outside
    worst = int(np.argmax(over.max(axis=0)))
    viol = float(max(over.max(), 0.0))
    frames = int((over > JOINT_LIMIT_TOL).any(axis=1).sum())
    report.measures["joint_limit_violation_rad"] = viol
    report.add("joint limits", viol <= JOINT_LIMIT_TOL,
               f"max violation {viol:.4f} rad" + (f" ({joints[worst]}, {frames} frames beyond the limit)" if viol else ""),
               f"{JOINT_LIMIT_TOL:g} rad")

    dt = 1.0 / clip.fps
    q = a["body_quat_w"] / np.linalg.norm(a["body_quat_w"], axis=-1, keepdims=True)
    for label, v, fd, unit in (
            ("joint_vel", a["joint_vel"], kin.central_difference(a["joint_pos"], dt), "rad/s"),
            ("body_lin_vel_w", a["body_lin_vel_w"], kin.central_difference(a["body_pos_w"], dt), "m/s"),
            ("body_ang_vel_w", a["body_ang_vel_w"], kin.angular_velocity(q, dt), "rad/s")):
        rel, dev = _rel_dev(v, fd)
        report.measures[f"{label}_rel_dev"] = rel
        report.measures[f"{label}_max_dev"] = dev
        report.add(f"{label} vs differences", rel <= VELOCITY_REL_TOL,
                   f"relative RMS deviation {rel:.4f}, max {dev:.3f} {unit}", f"{VELOCITY_REL_TOL:g} relative")

    fk = kin.forward_kinematics(a["body_pos_w"][:, 0], q[:, 0], a["joint_pos"], model=model)
    pos_mm = float(np.abs(fk["body_pos_w"] - a["body_pos_w"]).max()) * 1000.0
    rot = float(kin.quat_angle(fk["body_quat_w"], q).max())
    report.measures["fk_pos_error_mm"] = pos_mm
    report.measures["fk_rot_error_rad"] = rot
    report.add("body poses vs FK", pos_mm <= FK_POS_TOL_MM and rot <= FK_ROT_TOL_RAD,
               f"max {pos_mm:.4f} mm, {rot:.2e} rad", f"{FK_POS_TOL_MM:g} mm, {FK_ROT_TOL_RAD:g} rad")
    return report
