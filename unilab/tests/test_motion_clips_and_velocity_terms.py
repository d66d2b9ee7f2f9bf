"""Motion clips and the velocity task's terms. Each test fails on a small, deliberate change to the
code it names (recorded beside it) and passes on the code as written.

Pinned here: the clip's frame count, duration and fps limits; unit-quaternion tolerance; the
canonical file's refusals; CSV import (xyzw columns, 30 fps default, resampling to 50 fps by lerp
and shortest-path slerp, the output frame count); velocities by central differences with one-sided
end frames, world-frame SO(3) differences, body velocities of the body frame origin in world axes;
named-NPZ mapping by name (joint velocities, body arrays rebuilt by FK, the root body's velocities); the check's
thresholds; library weights; the velocity command's timer, ranges, heading controller, metrics,
reset and hold; the curriculum's stages; the reward kernels; the foot timers and observations.

Expected values are derived independently: trajectories are analytic (quadratic or linear in
time), so their differences and interpolants are written down by hand; body poses and velocities
come from MuJoCo itself (``mj_kinematics`` and a symmetric ``mj_integratePos`` difference, with
MuJoCo's quaternion routines); the velocity terms run on small stand-in envs with hand-set state."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets import g1_scene_path
from unilab.assets.motion import (
    MotionDataError,
    check_clip,
    import_motion,
    load_clip,
    load_library,
    save_clip,
)
from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.library import MotionLibrary
from unilab.tasks.velocity.mdp import observations as vel_obs
from unilab.tasks.velocity.mdp import rewards as vel_rew
from unilab.tasks.velocity.mdp.commands import UniformVelocityCommand, UniformVelocityCommandCfg
from unilab.tasks.velocity.mdp.curriculum import command_range_stages
from unilab.tasks.velocity.mdp.sensors import FeetContact, FeetContactForce

FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


# ---- MuJoCo references ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(str(g1_scene_path()))


@pytest.fixture(scope="module")
def clip():
    return synthetic_clip(frames=40, fps=50.0, name="sway")


def _axis_angle(axis, angle) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, np.asarray(axis, dtype=np.float64), angle)
    return q


def _mul(a, b) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mulQuat(q, a, b)
    return q


def _root_quat(yaw: float) -> np.ndarray:
    """A base tilted 0.3 rad about its x axis, turned ``yaw`` about world z (wxyz)."""
    return _mul(_axis_angle([0, 0, 1], yaw), _axis_angle([1, 0, 0], 0.3))


def _rotate(v, q) -> np.ndarray:
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(v, dtype=np.float64), q)
    return out


def _conj(q) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_negQuat(out, q)
    return out


def _fk(model, qpos) -> tuple[np.ndarray, np.ndarray]:
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    return data.xpos[1:].copy(), data.xquat[1:].copy()


def _body_velocities(model, qpos, qvel, h=1e-6) -> tuple[np.ndarray, np.ndarray]:
    """World linear velocity of each body frame origin and world angular velocity, from MuJoCo
    integrating ``qvel`` (its own free-joint convention) by -h and +h."""
    ends = []
    for dt in (-h, h):
        q = qpos.copy()
        mujoco.mj_integratePos(model, q, qvel, dt)
        ends.append(_fk(model, q))
    (p0, q0), (p1, q1) = ends
    ang = np.zeros_like(p0)
    for b in range(len(p0)):
        local = np.zeros(3)
        mujoco.mju_subQuat(local, q1[b], q0[b])  # q0 * quat(local) = q1: a body-frame rotation vector
        ang[b] = _rotate(local, q0[b]) / (2 * h)
    return (p1 - p0) / (2 * h), ang


def _csv(path, rows) -> str:
    np.savetxt(path, np.asarray(rows), delimiter=",", fmt="%.17g")
    return path


# ---- CSV import at its own rate: velocities by differences, body states by MuJoCo ----------------
# (mutants: kinematics.central_difference with second-order or forward end frames; angular_velocity
# over dt inside, over 2 dt at the first frame, reversed at the last frame, or in the body frame;
# forward_kinematics taking R w for R^T w (einsum or quat_to_mat transposed), local-frame or COM
# (mjOBJ_BODY) body velocities; the CSV quaternion read as wxyz; the root velocity left zero)

A, C, B = 0.3, 0.5, 0.8  # joint, root-x and yaw accelerations: q = A t^2, x = C t^2, yaw = B t^2
N_QUAD, FPS = 20, 50.0


@pytest.fixture(scope="module")
def quadratic(model, tmp_path_factory):
    hinge0 = model.key_qpos[model.key("knees_bent").id][7:]
    rows = []
    for k in range(N_QUAD):
        t = k / FPS
        q = _root_quat(B * t * t)
        rows.append([C * t * t, 0.1, 0.8, q[1], q[2], q[3], q[0], *(hinge0 + A * t * t)])
    path = _csv(tmp_path_factory.mktemp("csv") / "quadratic.csv", rows)
    return import_motion(path, fps=FPS, out_fps=FPS), hinge0


def _rate(k: int) -> float:
    """d(t^2)/dt by central differences, one-sided at the two ends, at frame k of N_QUAD."""
    dt = 1 / FPS
    if k == 0:
        return dt  # (dt^2 - 0) / dt
    if k == N_QUAD - 1:
        return (2 * k - 1) * dt  # (k^2 - (k-1)^2) dt^2 / dt
    return 2 * k * dt


def test_csv_velocities_are_central_differences_with_one_sided_ends(quadratic):
    clip, _ = quadratic
    rates = torch.tensor([_rate(k) for k in range(N_QUAD)], dtype=torch.float32)
    torch.testing.assert_close(clip.joint_vel, A * rates[:, None].expand(-1, 29), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(clip.body_lin_vel_w[:, 0], torch.stack(
        (C * rates, torch.zeros(N_QUAD), torch.zeros(N_QUAD)), dim=1), atol=1e-6, rtol=1e-5)


def test_csv_root_angular_velocity_is_the_world_frame_so3_difference(quadratic):
    clip, _ = quadratic
    rates = torch.tensor([_rate(k) for k in range(N_QUAD)], dtype=torch.float32)
    # A turn about world z of a tilted base: world axis z, whatever the tilt (the body-frame
    # difference would have a y component).
    expected = torch.stack((torch.zeros(N_QUAD), torch.zeros(N_QUAD), B * rates), dim=1)
    torch.testing.assert_close(clip.body_ang_vel_w[:, 0], expected, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("k", [0, 9])
def test_csv_body_states_are_mujocos_at_the_root_pose_and_joints(model, quadratic, k):
    clip, hinge0 = quadratic
    t, rate = k / FPS, _rate(k)
    root = _root_quat(B * t * t)
    qpos = np.r_[C * t * t, 0.1, 0.8, root, hinge0 + A * t * t]
    pos, quat = _fk(model, qpos)
    np.testing.assert_allclose(clip.body_pos_w[k].numpy(), pos, atol=2e-6)
    dots = np.abs(np.sum(clip.body_quat_w[k].numpy() * quat, axis=1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-6)
    # The free joint's qvel: world linear velocity, body-frame angular velocity.
    qvel = np.r_[C * rate, 0.0, 0.0, _rotate([0, 0, B * rate], _conj(root)), np.full(29, A * rate)]
    lin, ang = _body_velocities(model, qpos, qvel)
    np.testing.assert_allclose(clip.body_lin_vel_w[k].numpy(), lin, atol=1e-5)
    np.testing.assert_allclose(clip.body_ang_vel_w[k].numpy(), ang, atol=1e-5)


# ---- CSV resampling: 30 fps (the default) to 50 fps (the default) ----------------------------------
# (mutants: n_out without its rounding guard (115 frames); joints and root lerped with 1 - alpha or
# taken from the frame before; the root rotation not interpolated, slerped the long way or with a
# wrong weight; quat_to_rotvec without its hemisphere flip; the CSV default rate 50; the output
# default 30; duration_s as T / fps)

N_SRC, SRC_FPS = 70, 30.0  # 69 / 30 s = 2.3 s: 115 intervals at 50 fps, 114.99999999999999 in floats
V_ROOT, W_YAW = np.array([0.4, -0.2, 0.0]), 0.5


@pytest.fixture(scope="module")
def resampled(model, tmp_path_factory):
    hinge0 = model.key_qpos[model.key("knees_bent").id][7:]
    slopes = np.linspace(-0.1, 0.1, 29)
    rows = []
    for k in range(N_SRC):
        t = k / SRC_FPS
        q = _root_quat(W_YAW * t) * (-1.0 if k % 2 else 1.0)  # q and -q: the same rotation
        rows.append([*(np.array([0.0, 0.0, 0.8]) + V_ROOT * t), q[1], q[2], q[3], q[0], *(hinge0 + slopes * t)])
    path = _csv(tmp_path_factory.mktemp("csv") / "linear30.csv", rows)
    return import_motion(path), hinge0, slopes  # no rates given: 30 fps in, 50 fps out


def test_csv_defaults_to_30_fps_and_is_resampled_over_its_duration_to_50_fps(resampled):
    clip, *_ = resampled
    assert clip.fps == 50.0 and clip.num_frames == 116
    assert clip.duration_s == pytest.approx(2.3)


def test_resampled_joints_and_root_follow_the_source_trajectory_between_its_frames(resampled):
    clip, hinge0, slopes = resampled
    t = np.arange(116) / 50.0
    np.testing.assert_allclose(clip.joint_pos.numpy(), hinge0 + slopes * t[:, None], atol=2e-6)
    np.testing.assert_allclose(clip.body_pos_w[:, 0].numpy(), np.array([0.0, 0.0, 0.8]) + V_ROOT * t[:, None],
                               atol=2e-6)
    expected = np.array([_root_quat(W_YAW * s) for s in t])
    dots = np.abs(np.sum(clip.body_quat_w[:, 0].numpy() * expected, axis=1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-6)


def test_resampled_root_turns_at_its_constant_rate_on_every_frame(resampled):
    clip, *_ = resampled
    expected = torch.tensor([0.0, 0.0, W_YAW]).expand(116, -1)
    torch.testing.assert_close(clip.body_ang_vel_w[:, 0], expected, atol=1e-5, rtol=0)
    lin = torch.tensor(V_ROOT, dtype=torch.float32).expand(116, -1)
    torch.testing.assert_close(clip.body_lin_vel_w[:, 0], lin, atol=1e-5, rtol=0)


def test_angular_velocity_ignores_the_sign_of_each_quaternion():
    # (mutant: quat_to_rotvec without the flip to w >= 0)
    q = np.array([_axis_angle([0, 0, 1], 0.1 * k) * (-1.0) ** k for k in range(5)])
    np.testing.assert_allclose(kin.angular_velocity(q, 0.5), np.tile([0.0, 0.0, 0.2], (5, 1)), atol=1e-12)


# ---- named NPZ: columns mapped by name ------------------------------------------------------------
# (mutants: joint_vel kept in the file's order; the body arrays reordered by the inverse permutation;
# the root velocity taken from the file's first body or recomputed by differences; quaternions
# within the tolerance kept unnormalized)

def _root_qpos(clip) -> np.ndarray:
    return np.concatenate([clip.body_pos_w[:, 0].numpy(), clip.body_quat_w[:, 0].numpy(), clip.joint_pos.numpy()], 1)


def test_a_named_npz_maps_joint_velocities_by_name(tmp_path, clip):
    perm = np.roll(np.arange(29), 5)  # a rotation: not its own inverse
    qpos = _root_qpos(clip)
    np.savez(tmp_path / "named.npz", fps=50.0, joint_names=np.array(clip.joint_names)[perm],
             joint_pos=np.concatenate([qpos[:, :7], qpos[:, 7:][:, perm]], 1),
             joint_vel=clip.joint_vel.numpy()[:, perm])
    out = import_motion(tmp_path / "named.npz")
    assert torch.equal(out.joint_pos, clip.joint_pos) and torch.equal(out.joint_vel, clip.joint_vel)


def test_a_named_npz_naming_every_body_in_another_order_has_its_bodies_rebuilt_by_fk(tmp_path, clip):
    # (mutant: the stored body arrays kept instead of rebuilt, or reordered by index instead of name)
    order = np.roll(np.arange(30), 7)
    bodies = {f: getattr(clip, f).numpy()[:, order] for f in FIELDS if f.startswith("body")}
    bodies["body_quat_w"] = bodies["body_quat_w"] * np.float32(1.0005)  # within the tolerance: normalized
    np.savez(tmp_path / "bodies.npz", fps=50.0, joint_names=np.array(clip.joint_names),
             body_names=np.array(clip.body_names)[order], joint_pos=clip.joint_pos.numpy(),
             joint_vel=clip.joint_vel.numpy(), **bodies)
    out = import_motion(tmp_path / "bodies.npz")
    torch.testing.assert_close(out.body_pos_w, clip.body_pos_w, atol=1e-6, rtol=0)  # FK of the same state
    torch.testing.assert_close(out.body_quat_w, clip.body_quat_w, atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.linalg.vector_norm(out.body_quat_w, dim=-1), torch.ones(40, 30), atol=1e-6,
                               rtol=0)
    # The fixture's body velocities are differences of its body positions; the import's are the
    # model's rigid-body velocities at the file's joint and root velocities.
    expected = kin.forward_kinematics(clip.body_pos_w[:, 0].double().numpy(), clip.body_quat_w[:, 0].double().numpy(),
                                      clip.joint_pos.double().numpy(), clip.body_lin_vel_w[:, 0].double().numpy(),
                                      clip.body_ang_vel_w[:, 0].double().numpy(), clip.joint_vel.double().numpy())
    for f in ("body_lin_vel_w", "body_ang_vel_w"):
        torch.testing.assert_close(getattr(out, f), torch.from_numpy(expected[f]).float(), atol=1e-5, rtol=0)


def test_a_named_npz_takes_the_root_velocity_from_the_root_body(tmp_path, clip):
    names = ("left_hip_pitch_link", "pelvis")  # a subset, the root second: states recomputed by FK
    idx = [clip.body_names.index(n) for n in names]
    lin_offset, ang_offset = np.float32([0.2, -0.1, 0.05]), np.float32([0.0, 0.1, 0.3])
    lin, ang = clip.body_lin_vel_w.numpy()[:, idx].copy(), clip.body_ang_vel_w.numpy()[:, idx].copy()
    lin[:, 1] += lin_offset  # not the differences of the root position: the file's own value wins
    ang[:, 1] += ang_offset
    np.savez(tmp_path / "root.npz", fps=50.0, joint_names=np.array(clip.joint_names), body_names=np.array(names),
             joint_pos=clip.joint_pos.numpy(), joint_vel=clip.joint_vel.numpy(),
             body_pos_w=clip.body_pos_w.numpy()[:, idx], body_quat_w=clip.body_quat_w.numpy()[:, idx],
             body_lin_vel_w=lin, body_ang_vel_w=ang)
    out = import_motion(tmp_path / "root.npz")
    torch.testing.assert_close(out.body_lin_vel_w[:, 0], torch.from_numpy(lin[:, 1]), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.body_ang_vel_w[:, 0], torch.from_numpy(ang[:, 1]), atol=1e-5, rtol=0)


def test_an_unnamed_npz_whose_joints_turn_an_end_body_off_its_stored_orientation_is_refused(tmp_path, clip):
    # (mutant: the model-order check refusing only when position AND rotation are off)
    wrist = clip.joint_names.index("right_wrist_yaw_joint")  # the last body: it turns on its own axis
    joint_pos = clip.joint_pos.numpy().copy()
    joint_pos[:, wrist] += 0.01
    np.savez(tmp_path / "mjlab.npz", fps=np.array([50.0]), **{**{f: getattr(clip, f).numpy() for f in FIELDS},
                                                              "joint_pos": joint_pos})
    with pytest.raises(MotionDataError, match=r"not the G1 model's forward kinematics.*0\.573 deg"):
        import_motion(tmp_path / "mjlab.npz")


# ---- check: thresholds -------------------------------------------------------------------------------

def _failed(report) -> set[str]:
    return {i.name for i in report.items if not i.ok}


def test_a_joint_more_than_a_hundredth_of_a_radian_beyond_its_range_fails_and_frames_are_counted(model, clip):
    # (mutants: JOINT_LIMIT_TOL 0.1; frames counted from any overshoot, not beyond the tolerance)
    elbow = clip.joint_names.index("left_elbow_joint")
    hi = float(model.joint("left_elbow_joint").range[1])
    within = clip.joint_pos.clone()
    within[10:14, elbow] = hi + 0.005
    assert "joint limits" not in _failed(check_clip(dataclasses.replace(clip, joint_pos=within)))
    beyond = within.clone()
    beyond[3:6, elbow] = hi + 0.02
    report = check_clip(dataclasses.replace(clip, joint_pos=beyond))
    assert "joint limits" in _failed(report)
    assert report.measures["joint_limit_violation_rad"] == pytest.approx(0.02, abs=1e-5)
    assert "(left_elbow_joint, 3 frames beyond the limit)" in next(i.value for i in report.items
                                                                   if i.name == "joint limits")


def test_velocities_eight_percent_off_their_differences_fail_and_three_percent_pass(clip):
    # (mutant: VELOCITY_REL_TOL 0.1). The clip's joint velocities are its central differences.
    assert "joint_vel vs differences" not in _failed(check_clip(dataclasses.replace(clip,
                                                                                    joint_vel=clip.joint_vel * 1.03)))
    report = check_clip(dataclasses.replace(clip, joint_vel=clip.joint_vel * 1.08))
    assert "joint_vel vs differences" in _failed(report)
    assert report.measures["joint_vel_rel_dev"] == pytest.approx(0.08, rel=1e-3)


def test_a_still_clip_is_judged_against_the_floor_not_its_zero_differences(clip):
    # (mutant: VELOCITY_REL_FLOOR 1e-9). Every frame the same pose; joint velocities of 0.002 rad/s
    # are 0.002 / 0.05 = 0.04 of the floor: within 0.05.
    still = {f: getattr(clip, f)[:1].expand(20, *getattr(clip, f).shape[1:]).clone() for f in FIELDS}
    still.update(joint_vel=torch.full((20, 29), 0.002), body_lin_vel_w=torch.zeros(20, 30, 3),
                 body_ang_vel_w=torch.zeros(20, 30, 3))
    report = check_clip(dataclasses.replace(clip, **still))
    assert report.ok, report.format()
    assert report.measures["joint_vel_rel_dev"] == pytest.approx(0.04, rel=1e-4)


def test_a_body_orientation_off_by_five_milliradians_alone_fails_the_fk_check(clip):
    # (mutants: FK_ROT_TOL_RAD 1e-2; the FK item passing on position OR rotation)
    wrist = clip.joint_names.index("right_wrist_yaw_joint")
    joint_pos = clip.joint_pos.clone()
    joint_pos[:, wrist] += 0.005
    report = check_clip(dataclasses.replace(clip, joint_pos=joint_pos))
    assert _failed(report) == {"body poses vs FK"}
    assert report.measures["fk_pos_error_mm"] < 0.01
    assert report.measures["fk_rot_error_rad"] == pytest.approx(0.005, rel=0.01)


def test_negated_quaternions_are_the_same_orientations_to_the_check(clip):
    # (mutant: quat_angle sign-sensitive). The root kept, so FK's quaternions keep their sign and
    # every other stored one is the negative of MuJoCo's.
    quat = clip.body_quat_w.clone()
    quat[:, 1:] *= -1.0
    report = check_clip(dataclasses.replace(clip, body_quat_w=quat))
    assert report.ok, report.format()
    assert report.measures["fk_rot_error_rad"] < 1e-3


def test_the_check_fails_an_fps_outside_1_to_1000(clip):
    # (mutant: the fps item always ok)
    assert "fps" in _failed(check_clip(dataclasses.replace(clip, fps=2000.0)))
    assert check_clip(dataclasses.replace(clip, fps=50.0)).ok


def test_quaternion_norms_two_thousandths_off_are_refused_half_a_thousandth_pass(tmp_path, clip):
    # (mutants: QUAT_NORM_TOL 1e-2; the check's tolerance 10x)
    off = dataclasses.replace(clip, body_quat_w=clip.body_quat_w * 1.002)
    assert "unit quaternions" in _failed(check_clip(off))
    with pytest.raises(MotionDataError, match="non-unit quaternions"):
        save_clip(off, tmp_path / "off.npz")
    near = dataclasses.replace(clip, body_quat_w=clip.body_quat_w * 1.0005)
    assert "unit quaternions" not in _failed(check_clip(near))
    save_clip(near, tmp_path / "near.npz")


# ---- the clip and its file ------------------------------------------------------------------------

def test_a_clip_needs_two_frames_and_a_positive_fps(tmp_path, clip):
    # (mutants: MotionClip and validate_arrays taking 1 frame; MotionClip taking fps 0)
    one = {f: getattr(clip, f)[:1] for f in FIELDS}
    with pytest.raises(ValueError, match="at least 2 frames, got 1"):
        dataclasses.replace(clip, **one)
    with pytest.raises(ValueError, match="fps must be a positive finite number"):
        dataclasses.replace(clip, fps=0.0)
    z = dict(np.load(save_clip(clip, tmp_path / "c.npz")))
    np.savez(tmp_path / "one.npz", **{**z, **{f: z[f][:1] for f in FIELDS}})
    with pytest.raises(MotionDataError, match="at least 2 frames, got 1"):
        load_clip(tmp_path / "one.npz")


def test_duration_is_the_time_from_the_first_frame_to_the_last(clip):
    # (mutant: T / fps)
    assert clip.duration_s == pytest.approx(39 / 50)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("format_version", np.int64(2), "format_version 2, this unilab reads 1"),
    ("fps", np.float64(0.0), r"fps must be a finite number in \[1, 1000\], got 0.0"),
    ("joint_pos", None, "joint_pos: expected float32, got float64"),
])
def test_load_refuses_another_version_an_fps_out_of_range_and_float64_arrays(tmp_path, clip, key, value, message):
    # (mutants: the version, fps and dtype checks of load_clip dropped)
    z = dict(np.load(save_clip(clip, tmp_path / "c.npz")))
    z[key] = z[key].astype(np.float64) if value is None else value
    np.savez(tmp_path / "bad.npz", **z)
    with pytest.raises(MotionDataError, match=message):
        load_clip(tmp_path / "bad.npz")


def test_save_refuses_a_path_without_the_npz_suffix(tmp_path, clip):
    with pytest.raises(MotionDataError, match="must end in .npz"):
        save_clip(clip, tmp_path / "c.txt")
    assert not list(tmp_path.iterdir())


# ---- library ---------------------------------------------------------------------------------------

def test_library_refuses_a_negative_weight_and_a_weight_count_that_differs(tmp_path, clip):
    # (mutants: only non-finite weights refused; extra weights accepted)
    path = save_clip(clip, tmp_path / "c.npz")
    with pytest.raises(MotionDataError, match="finite, >= 0"):
        load_library([path, path], weights=[1.0, -0.5])
    with pytest.raises(MotionDataError, match="2 values for 1 clips"):
        load_library([path], weights=[1.0, 1.0])


def test_a_library_of_clips_with_joints_in_another_order_names_the_first_difference(clip):
    # (mutant: the reported index that of the first equal name)
    names = clip.joint_names
    swapped = dataclasses.replace(clip, joint_names=(names[1], names[0], *names[2:]))
    with pytest.raises(MotionDataError, match=rf"in another order \(first at index 0: '{names[1]}', the first has "
                                              rf"'{names[0]}'\)"):
        MotionLibrary((clip, swapped), torch.tensor([0.5, 0.5]))


# ---- the velocity command on a stand-in env ------------------------------------------------------------

def _env(n: int, **robot) -> SimpleNamespace:
    state = {"heading_w": torch.zeros(n), "root_lin_vel_b": torch.zeros(n, 3), "root_lin_vel_w": torch.zeros(n, 3),
             "root_ang_vel_b": torch.zeros(n, 3), "root_ang_vel_w": torch.zeros(n, 3), **robot}
    return SimpleNamespace(num_envs=n, device=torch.device("cpu"), rng=torch.Generator().manual_seed(0),
                           robot=SimpleNamespace(**state), invalidate_step_graphs=lambda: None)


def _twist(n: int = 4, env=None, **cfg) -> UniformVelocityCommand:
    return UniformVelocityCommand(UniformVelocityCommandCfg(**cfg), env or _env(n))


def test_a_command_is_resampled_when_its_time_runs_out_and_not_before():
    # (mutants: the timer at half speed; expiry at < 0 instead of <= 0). 1 s in steps of 0.25 s
    # (both exact in binary): the first step resamples (time 0), then every fourth.
    twist = _twist(standing_fraction=0.0, resampling_time_range_s=(1.0, 1.0))
    changed, before = [], twist.command.clone()
    for _ in range(12):
        twist.step(0.25)
        changed.append(bool((twist.command != before).all()))
        before = twist.command.clone()
    assert [k + 1 for k, c in enumerate(changed) if c] == [1, 5, 9]


def test_commands_are_drawn_over_the_whole_configured_ranges():
    # (mutant: the draw's width taken as the range's high end)
    ranges = ((0.5, 1.5), (-0.4, -0.2), (1.0, 2.0))
    twist = _twist(2000, standing_fraction=0.0, lin_vel_x=ranges[0], lin_vel_y=ranges[1], ang_vel_z=ranges[2])
    twist.step(0.02)
    for axis, (lo, hi) in enumerate(ranges):
        c = twist.command[:, axis]
        assert lo <= c.min() < lo + 0.02 * (hi - lo) and hi - 0.02 * (hi - lo) < c.max() <= hi, axis


def test_the_heading_controller_wraps_the_error_and_clips_to_the_current_yaw_range():
    # (mutants: the error not wrapped; the clip fixed at +-1; the clip kept at the configured range
    # after set_ranges). Target 3.0 rad; stiffness 0.5; yaw range (-0.3, 0.6).
    env = _env(4, heading_w=torch.tensor([2.8, 1.0, -3.0, 5.0]))
    twist = _twist(env=env, standing_fraction=0.0, heading_command=True, heading_fraction=1.0,
                   heading_range=(3.0, 3.0), ang_vel_z=(-0.3, 0.6))
    twist.step(0.02)
    # errors 0.2, 2.0, 6.0 -> 6 - 2 pi, -2.0: yaw rates 0.1, 1.0 -> 0.6, -0.1416, -1.0 -> -0.3
    torch.testing.assert_close(twist.command[:, 2], torch.tensor([0.1, 0.6, 0.5 * (6.0 - 2 * math.pi), -0.3]))
    twist.set_ranges(ang_vel_z=(-0.05, 0.2))
    twist.refresh()
    torch.testing.assert_close(twist.command[:, 2], torch.tensor([0.1, 0.2, -0.05, -0.05]))


def test_the_metrics_compare_the_command_with_the_body_frame_twist():
    # (mutants: the world-frame linear velocity; an L1 norm; the yaw offset unsigned or of the
    # opposite sign). A base turned 90 degrees: its world velocity is its body velocity rotated.
    env = _env(2, root_lin_vel_b=torch.tensor([[0.2, 0.1, 9.0], [0.5, 0.5, 0.0]]),
               root_lin_vel_w=torch.tensor([[-0.1, 0.2, 9.0], [-0.5, 0.5, 0.0]]),
               root_ang_vel_b=torch.tensor([[5.0, 5.0, 0.3], [0.0, 0.0, -0.1]]))
    twist = _twist(env=env)
    twist.hold(torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]))
    # achieved - commanded: (-0.3, -0.4, +0.3) and (0, 0, -0.1): planar norms 0.5 and 0, yaw
    # errors 0.3 and 0.1, yaw offsets +0.3 (left of the command) and -0.1
    torch.testing.assert_close(twist.metrics(), torch.tensor([0.25, 0.2, 0.1]))


def test_a_reset_gives_the_done_rows_a_new_command_and_keeps_the_others():
    # (mutant: reset keeping every row's command)
    twist = _twist(standing_fraction=0.0, resampling_time_range_s=(10.0, 10.0))
    twist.step(0.02)
    before = twist.command.clone()
    twist.step(0.02)
    twist.reset(torch.tensor([True, False, True, False]))
    twist.refresh()
    assert (twist.command[[0, 2]] != before[[0, 2]]).all() and torch.equal(twist.command[[1, 3]], before[[1, 3]])


def test_a_held_command_is_exact_on_standing_and_heading_rows_and_is_not_resampled():
    # (mutants: hold leaving rows standing or heading; a held command still resampled)
    twist = _twist(standing_fraction=1.0, heading_command=True, heading_fraction=1.0,
                   resampling_time_range_s=(0.01, 0.01))
    twist.step(0.02)
    assert torch.equal(twist.command, torch.zeros(4, 3))  # every row standing
    held = torch.tensor([[0.5, -0.2, 0.3]]).expand(4, -1).clone()
    twist.hold(held)
    assert torch.equal(twist.command, held)
    for _ in range(3):
        twist.step(0.02)
    assert torch.equal(twist.command, held)


def test_the_command_defaults_are_the_documented_ones():
    # (mutants: heading_fraction and heading_range defaults; docs/tasks.md, Commands)
    cfg = UniformVelocityCommandCfg()
    assert (cfg.lin_vel_x, cfg.lin_vel_y, cfg.ang_vel_z) == ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))
    assert cfg.resampling_time_range_s == (3.0, 8.0) and cfg.standing_fraction == 0.1
    assert cfg.single_axis_fraction == 0.0 and cfg.heading_command is False
    assert cfg.heading_fraction == 0.3 and cfg.heading_stiffness == 0.5
    assert cfg.heading_range == pytest.approx((-math.pi, math.pi), abs=1e-5)


# ---- the curriculum -------------------------------------------------------------------------------------

def _curriculum(stages, twist=None):
    twist = twist or _twist()
    env = SimpleNamespace(command_manager=SimpleNamespace(term=lambda name, owner: twist), common_step_counter=0)
    term = command_range_stages(SimpleNamespace(params={"command_name": "twist", "stages": stages}), env)
    return term, env, twist


def _ranges_by_step(term, env, twist, steps):
    out = []
    for step in range(steps):
        env.common_step_counter = step
        term(env)
        out.append(twist.ranges)
    return out


def test_a_first_stage_after_step_0_applies_at_its_step_and_on_a_first_call_past_it():
    # (mutant: the current stage starting at 0, so a first call already in stage 0 applies nothing)
    term, env, twist = _curriculum([{"step": 2, "lin_vel_x": (0.0, 0.5)}])
    got = [r[0] for r in _ranges_by_step(term, env, twist, 4)]
    assert got == [(-1.0, 1.0), (-1.0, 1.0), (0.0, 0.5), (0.0, 0.5)]
    term, env, twist = _curriculum([{"step": 2, "lin_vel_x": (0.0, 0.5)}])
    env.common_step_counter = 5  # a resumed run: its step counter already past the stage
    assert term(env) == {"stage": 0} and twist.ranges[0] == (0.0, 0.5)


def test_stages_are_applied_in_step_order_and_keep_the_ranges_of_earlier_stages():
    # (mutants: only the current stage's ranges set; stages not sorted by step)
    stages = [{"step": 3, "lin_vel_x": (2.0, 2.0)}, {"step": 1, "lin_vel_x": (0.5, 0.5), "ang_vel_z": (-0.5, 0.5)}]
    term, env, twist = _curriculum(stages)
    got = _ranges_by_step(term, env, twist, 4)
    assert [r[0] for r in got] == [(-1.0, 1.0), (0.5, 0.5), (0.5, 0.5), (2.0, 2.0)]
    assert [r[2] for r in got] == [(-1.0, 1.0), (-0.5, 0.5), (-0.5, 0.5), (-0.5, 0.5)]


def test_a_negative_stage_step_is_refused():
    with pytest.raises(ValueError, match=r"stages\[0\]\.step=-1: expected an int >= 0"):
        _curriculum([{"step": -1, "lin_vel_x": (0.0, 0.5)}])


# ---- rewards ---------------------------------------------------------------------------------------------

def test_command_speed_is_the_planar_speed_plus_the_absolute_yaw_rate():
    # (mutant: the norm of all three components)
    speed = vel_rew.command_speed(torch.tensor([[0.3, 0.4, -0.5], [0.0, 0.0, 0.0]]))
    torch.testing.assert_close(speed, torch.tensor([1.0, 0.0]))


def _posture_env(joint_pos, default) -> SimpleNamespace:
    robot = SimpleNamespace(joint_names=("a_hip", "b_knee"), joint_pos=torch.tensor(joint_pos))
    return SimpleNamespace(device=torch.device("cpu"), robot=robot, default_joint_pos=torch.tensor(default))


POSTURE = {"std_standing": {"a_.*": 0.5, ".*": 0.25}, "std_walking": {".*": 1.0}, "std_running": {".*": 2.0},
           "walking_threshold": 0.25, "running_threshold": 1.5}


def test_posture_is_the_mean_squared_deviation_over_the_variance_of_the_speeds_regime():
    # (mutants: sum instead of mean; 1/std instead of 1/std^2; the last matching pattern winning;
    # a speed at a threshold counted below it)
    env = _posture_env([[0.1, 0.2]] * 4, [0.0, 0.0])
    posture = vel_rew.Posture(env, **POSTURE)
    error = posture.error(env, torch.tensor([0.0, 0.25, 1.0, 1.5]))
    # standing: stds 0.5 (a_hip: the first pattern) and 0.25 -> (0.04 + 0.64) / 2; walking: std 1
    # -> (0.01 + 0.04) / 2; running: std 2 -> 0.05 / 4 / 2
    torch.testing.assert_close(error, torch.tensor([0.34, 0.025, 0.025, 0.00625]))


def _feet(contact, air, contact_time, vel=None) -> SimpleNamespace:
    vel = torch.zeros(len(contact), 2, 2) if vel is None else torch.tensor(vel)
    return SimpleNamespace(contact=torch.tensor(contact), air_time=torch.tensor(air),
                           contact_time=torch.tensor(contact_time), foot_lin_vel_xy=lambda: vel)


def test_foot_slip_counts_the_planar_speed_of_feet_in_contact_only():
    # (mutant: feet in the air counted)
    feet = _feet([[True, False], [False, False]], [[0.0, 0.1], [0.1, 0.1]], [[0.1, 0.0], [0.0, 0.0]],
                 vel=[[[0.3, 0.4], [2.0, 2.0]], [[1.0, 1.0], [1.0, 1.0]]])
    torch.testing.assert_close(vel_rew.slip(feet), torch.tensor([0.25, 0.0]))


def _feet_env(command, feet) -> SimpleNamespace:
    return SimpleNamespace(command_manager=SimpleNamespace(term=lambda name, owner: SimpleNamespace(command=command)),
                           sensor=lambda name, owner: feet)


def test_the_gait_terms_default_to_a_0_1_command_threshold_and_a_0_4_s_cap():
    # (mutants: the unfused defaults changed; active at a speed equal to the threshold)
    feet = _feet([[True, False]] * 3, [[0.0, 0.5]] * 3, [[0.45, 0.0]] * 3, vel=[[[1.0, 0.0], [0.0, 0.0]]] * 3)
    command = torch.tensor([[0.3, 0.0, 0.0], [0.0, 0.0, 0.05], [0.0, 0.0, 0.1]])
    env = _feet_env(command, feet)
    cfg = SimpleNamespace(params={"command_name": "twist", "sensor_name": "feet"})
    torch.testing.assert_close(vel_rew.feet_air_time(cfg, env)(env), torch.tensor([0.4, 0.0, 0.0]))
    torch.testing.assert_close(vel_rew.foot_slip(cfg, env)(env), torch.tensor([1.0, 0.0, 0.0]))
    at = SimpleNamespace(params={**cfg.params, "command_threshold": 0.25})
    env = _feet_env(torch.tensor([[0.0, 0.0, 0.25], [0.0, 0.0, 0.5], [0.0, 0.0, 0.0]]), feet)
    torch.testing.assert_close(vel_rew.feet_air_time(at, env)(env), torch.tensor([0.0, 0.4, 0.0]))


def _fused_env(command) -> SimpleNamespace:
    n = len(command)
    tilt = _axis_angle([1, 0, 0], 0.4)  # torso rolled 0.4 rad: gravity's body-frame xy has norm sin 0.4
    robot = SimpleNamespace(
        require=lambda *a: None, body_index=lambda name, owner: 1, joint_names=("a_hip", "b_knee"),
        joint_limits=torch.tensor([[-1.0, 1.0], [0.0, 2.0]]), joint_pos=torch.tensor([[0.95, 0.05]] * n),
        body_quat_w=torch.tensor([[[1.0, 0.0, 0.0, 0.0], tilt.tolist()]] * n, dtype=torch.float32),
        body_ang_vel_w=torch.tensor([[[9.0, 9.0, 9.0], [0.3, -0.4, 7.0]]] * n),
        root_lin_vel_b=torch.tensor([[0.5, 0.1, 0.2]] * n), root_ang_vel_b=torch.tensor([[0.1, -0.2, 0.4]] * n))
    feet = _feet([[True, False]] * n, [[0.0, 0.3]] * n, [[0.5, 0.0]] * n, vel=[[[0.3, 0.4], [1.0, 1.0]]] * n)
    command_term = SimpleNamespace(command=command)
    return SimpleNamespace(
        device=torch.device("cpu"), num_envs=n, robot=robot, default_joint_pos=torch.tensor([0.0, 0.0]),
        sensor=lambda name, owner: feet, command_manager=SimpleNamespace(term=lambda name, owner: command_term),
        action_manager=SimpleNamespace(action=torch.tensor([[0.5, 0.0]] * n),
                                       prev_action=torch.tensor([[0.2, 0.4]] * n)),
        termination_manager=SimpleNamespace(terminated=torch.tensor([True] + [False] * (n - 1))))


def test_the_fused_velocity_rewards_by_hand():
    # (mutant: the fused feet terms active at any nonzero command speed, not above the threshold)
    command = torch.tensor([[1.0, 0.0, 0.0], [0.02, 0.0, 0.03]])  # speeds 1.0 (walking) and 0.05 (standing)
    env = _fused_env(command)
    params = {"command_name": "twist", "std_lin_vel": 0.5, "std_ang_vel": math.sqrt(0.5), "std_upright": 0.5,
              "lin_vel_z_weight": 2.0, "ang_vel_xy_weight": 0.05, "torso_body": "torso", "posture": POSTURE,
              "soft_factor": 0.9, "sensor_name": "feet", "air_time_threshold": 0.4, "command_threshold": 0.1}
    got = vel_rew.velocity_rewards(SimpleNamespace(params=params), env)(env)
    v, w = (0.5, 0.1, 0.2), (0.1, -0.2, 0.4)
    expected = []
    for k, (cx, cy, cz) in enumerate(command.tolist()):
        lin_err = (cx - v[0]) ** 2 + (cy - v[1]) ** 2 + 2.0 * v[2] ** 2
        ang_err = (cz - w[2]) ** 2 + 0.05 * (w[0] ** 2 + w[1] ** 2)
        # joints 0.95 and 0.05 from default 0: walking std 1 for both; standing 0.5 (a_hip, the
        # first matching pattern) and 0.25
        posture = (0.95 ** 2 + 0.05 ** 2) / 2 if k == 0 else (0.95 ** 2 / 0.25 + 0.05 ** 2 / 0.0625) / 2
        moving = float(k == 0)
        expected.append([
            math.exp(-lin_err / 0.25), math.exp(-ang_err / 0.5), math.exp(-math.sin(0.4) ** 2 / 0.25),
            math.exp(-posture),
            0.3 ** 2 + 0.4 ** 2,  # the torso's roll and pitch rates
            0.3 ** 2 + 0.4 ** 2,  # the action rate
            0.05 + 0.05,  # beyond the soft ranges (-0.9, 0.9) and (0.1, 1.9)
            0.3 * moving,  # single stance: min(contact time 0.5, air time 0.3), under the 0.4 cap
            0.25 * moving,  # the stance foot's planar speed squared
            1.0, float(k == 0)])
    torch.testing.assert_close(got, torch.tensor(expected), atol=1e-6, rtol=1e-5)


# ---- foot timers and the contact observation --------------------------------------------------------------

def test_foot_timers_count_air_and_contact_time_and_restart_on_reset():
    # (mutants: either timer never restarting on a touchdown / lift-off; a reset keeping either)
    heights = torch.zeros(2, 3, 3)
    robot = SimpleNamespace(require=lambda *a: None, body_index=lambda name, owner: {"l": 1, "r": 2}[name],
                            cached=lambda key, fn: fn(), body_pos_w=heights)
    env = SimpleNamespace(robot=robot, step_dt=0.25, num_envs=2, device=torch.device("cpu"))
    feet = FeetContact(SimpleNamespace(params={"bodies": ["l", "r"], "contact_height": 0.05}), env)
    for left_z in (0.0, 0.0, 0.2, 0.2, 0.0):  # left foot: down, down, up, up, down; right down
        heights[:, 1, 2] = left_z
        feet.update(env)
    assert feet.contact.tolist() == [[True, True]] * 2
    torch.testing.assert_close(feet.air_time, torch.zeros(2, 2))  # the left foot just touched down
    torch.testing.assert_close(feet.contact_time, torch.tensor([[0.25, 1.25]] * 2))
    heights[:, 1, 2] = 0.2
    feet.update(env)
    torch.testing.assert_close(feet.air_time, torch.tensor([[0.25, 0.0]] * 2))
    torch.testing.assert_close(feet.contact_time, torch.tensor([[0.0, 1.5]] * 2))
    feet.reset(torch.tensor([True, False]))
    torch.testing.assert_close(feet.air_time, torch.tensor([[0.0, 0.0], [0.25, 0.0]]))
    torch.testing.assert_close(feet.contact_time, torch.tensor([[0.0, 0.0], [0.0, 1.5]]))


def test_a_contact_sensor_listing_the_feet_in_another_order_is_refused():
    # (mutant: the sensor's body order not compared with the feet's)
    view = SimpleNamespace(spec=SimpleNamespace(bodies=("r", "l")))
    robot = SimpleNamespace(contact=lambda name, owner: view, body_index=lambda name, owner: {"l": 1, "r": 2}[name])
    env = SimpleNamespace(robot=robot, step_dt=0.02, num_envs=2, device=torch.device("cpu"))
    with pytest.raises(ValueError, match=r"senses \['r', 'l'\], not the feet \['l', 'r'\]"):
        FeetContactForce(SimpleNamespace(params={"contact_sensor": "feet", "bodies": ["l", "r"]}), env)
    FeetContactForce(SimpleNamespace(params={"contact_sensor": "feet", "bodies": ["r", "l"]}), env)


def test_the_feet_contact_observation_is_flags_then_air_times_then_contact_times():
    # (mutant: air and contact times swapped)
    feet = _feet([[True, False]], [[0.0, 0.3]], [[0.7, 0.0]])
    obs = vel_obs.feet_contact(SimpleNamespace(params={"sensor_name": "feet"}), _feet_env(None, feet))
    torch.testing.assert_close(obs(None), torch.tensor([[1.0, 0.0, 0.0, 0.3, 0.7, 0.0]]))
