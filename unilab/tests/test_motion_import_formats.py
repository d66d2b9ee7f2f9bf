"""`unilab-motion import` of other projects' motion files, and the size limits every clip loader
checks before allocating.

The files are made here from a pinned real clip (the walk, 455 frames at 50 fps, in the model's
depth-first order): holosoma's layout (a ``world`` body and collision spheres the model lacks,
qpos-layout joints), shuffled names, BeyondMimic's breadth-first Isaac Lab order with and without
names, mjlab's unnamed layout, MuJoCo's ``xpos`` with the world body first, qpos-only files, and
files whose columns are not what they say (refused). Each accepted import must reproduce the
pinned clip: joints exactly, body positions within 1e-5 m (0.01 mm), orientations within 1e-5 rad
and body velocities within 1e-4 m/s or rad/s (the model's FK of the same state in float64 against
the stored float32: measured 1.1e-6 m, 3e-7 rad, 4e-6).
"""

from __future__ import annotations

import re
import time
import zipfile

import mujoco
import numpy as np
import pytest
import torch
from fk_clip import ISAACLAB_ORDER as ISAACLAB_JOINTS
from unilab.assets import g1_scene_path
from unilab.assets.motion import (
    MotionDataError,
    export_csv,
    import_motion,
    import_motion_with_report,
    load_clip,
    load_library,
    pinned_clip_paths,
)
from unilab.assets.motion import kinematics as kin
from unilab.assets.motion.cli import main as motion_cli
from unilab.assets.motion.io import MAX_CLIP_FRAMES, read_npz

WALK = "walk_forward_loop_002__A022"
FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
BODY_FIELDS = FIELDS[2:]
POS_TOL, ROT_TOL, VEL_TOL = 1e-5, 1e-5, 1e-4
SPHERES = ("left_hand_collision_sphere", "right_hand_collision_sphere", "head_collision_sphere")


@pytest.fixture(scope="module")
def walk():
    return load_clip(pinned_clip_paths(fetch=False)[WALK])


@pytest.fixture(scope="module")
def z(walk):
    """The walk's arrays (float32, model order) and its names."""
    return {**{f: getattr(walk, f).numpy() for f in FIELDS}, "joints": walk.joint_names, "bodies": walk.body_names}


def _root(z) -> np.ndarray:
    return np.concatenate([z["body_pos_w"][:, 0], z["body_quat_w"][:, 0]], axis=1)


def _root_vel(z) -> np.ndarray:
    return np.concatenate([z["body_lin_vel_w"][:, 0], z["body_ang_vel_w"][:, 0]], axis=1)


def _cols(names, order) -> list[int]:
    return [names.index(n) for n in order]


def _with_extra_bodies(z, order=None):
    """The walk's body arrays with a world body first (at rest at the origin) and three collision
    spheres last (still, 0.25 m off the origin: poses the model's FK does not give), in ``order``."""
    frames = z["joint_pos"].shape[0]
    names = ("world", *z["bodies"], *SPHERES)

    def still(width, value, count):
        a = np.full((frames, count, width), value, np.float32)
        if width == 4:
            a[..., :] = (1.0, 0.0, 0.0, 0.0)
        return a

    arrays = {}
    for f in BODY_FIELDS:
        width, value = z[f].shape[2], 0.25 if f == "body_pos_w" else 0.0
        arrays[f] = np.concatenate([still(width, 0.0, 1), z[f], still(width, value, len(SPHERES))], axis=1)
    order = np.arange(len(names)) if order is None else order
    return tuple(np.array(names)[order]), {f: a[:, order] for f, a in arrays.items()}


def _save(tmp_path, name, **arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return path


def _assert_is_the_walk(clip, walk, velocities=True):
    assert clip.joint_names == walk.joint_names and clip.body_names == walk.body_names
    assert clip.num_frames == walk.num_frames and clip.fps == walk.fps
    assert torch.equal(clip.joint_pos, walk.joint_pos)
    assert (clip.body_pos_w - walk.body_pos_w).abs().max().item() < POS_TOL
    rot = kin.quat_angle(clip.body_quat_w.double().numpy(), walk.body_quat_w.double().numpy()).max()
    assert rot < ROT_TOL, rot
    if velocities:
        assert torch.equal(clip.joint_vel, walk.joint_vel)
        for f in ("body_lin_vel_w", "body_ang_vel_w"):
            assert (getattr(clip, f) - getattr(walk, f)).abs().max().item() < VEL_TOL, f


# --- layouts that import ---------------------------------------------------------------------------

def test_holosoma_layout_with_a_world_body_and_collision_spheres_imports_ignoring_them(tmp_path, z, walk):
    # (mutant: bodies compared by index instead of by name -> the world body shifts every one)
    names, bodies = _with_extra_bodies(z)
    path = _save(tmp_path, "holosoma", fps=np.array([50]), joint_names=np.array(z["joints"]),
                 body_names=np.array(names), joint_pos=np.concatenate([_root(z), z["joint_pos"]], 1),
                 joint_vel=np.concatenate([_root_vel(z), z["joint_vel"]], 1), **bodies)
    clip, report = import_motion_with_report(path, name=WALK)
    _assert_is_the_walk(clip, walk)
    assert report.ignored_bodies == ("world", *SPHERES) and report.compared_bodies == 30
    assert report.fk_pos_mm < 0.01 and report.fk_rot_deg < 1e-3, report.lines()
    assert report.root == "the free-joint columns of joint_pos"


def test_shuffled_joints_and_bodies_with_extra_bodies_are_mapped_by_name(tmp_path, z, walk):
    # (mutant: joint columns taken in file order, skipping the mapping by name)
    rng = np.random.default_rng(3)
    jperm = rng.permutation(29)
    names, bodies = _with_extra_bodies(z, rng.permutation(34))
    path = _save(tmp_path, "shuffled", fps=np.array(50.0), joint_names=np.array(z["joints"])[jperm],
                 body_names=np.array(names), joint_pos=z["joint_pos"][:, jperm], joint_vel=z["joint_vel"][:, jperm],
                 **bodies)
    clip, report = import_motion_with_report(path, name=WALK)
    _assert_is_the_walk(clip, walk)  # the root pose came from the pelvis, wherever it is listed
    assert set(report.ignored_bodies) == {"world", *SPHERES}
    assert report.root == "the root body 'pelvis' of body_pos_w/body_quat_w"


@pytest.mark.parametrize("named", [False, True])
def test_beyondmimic_layout_in_isaac_labs_breadth_first_order_imports(tmp_path, z, walk, named):
    joints, bodies = ISAACLAB_JOINTS, kin.breadth_first_body_names(kin.g1_model())
    j, b = _cols(z["joints"], joints), _cols(z["bodies"], bodies)
    names = {"joint_names": np.array(joints), "body_names": np.array(bodies)} if named else {}
    path = _save(tmp_path, "beyondmimic", fps=np.array([50]), joint_pos=z["joint_pos"][:, j],
                 joint_vel=z["joint_vel"][:, j], **{f: z[f][:, b] for f in BODY_FIELDS}, **names)
    clip, report = import_motion_with_report(path, name=WALK)
    _assert_is_the_walk(clip, walk)
    assert ("by name" if named else "Isaac Lab's breadth-first order") in report.joint_order


def test_isaac_labs_order_is_the_models_tree_breadth_first():
    model = kin.g1_model()
    assert kin.breadth_first_joint_names(model) == ISAACLAB_JOINTS
    assert kin.breadth_first_body_names(model)[:4] == ("pelvis", "left_hip_pitch_link", "right_hip_pitch_link",
                                                       "waist_yaw_link")


def test_mjlab_layout_and_mujoco_xpos_with_the_world_body_first_import(tmp_path, z, walk):
    mjlab = _save(tmp_path, "mjlab", fps=np.array([50]), **{f: z[f] for f in FIELDS})
    clip, report = import_motion_with_report(mjlab, name=WALK)
    _assert_is_the_walk(clip, walk)
    assert "in the model's order" in report.joint_order and not report.ignored_bodies
    frames = z["joint_pos"].shape[0]
    world = {f: np.concatenate([np.zeros((frames, 1, z[f].shape[2]), np.float32), z[f]], 1) for f in BODY_FIELDS}
    world["body_quat_w"][:, 0, 0] = 1.0
    xpos = _save(tmp_path, "xpos", fps=np.array([50]), joint_pos=z["joint_pos"], joint_vel=z["joint_vel"], **world)
    clip, report = import_motion_with_report(xpos, name=WALK)
    _assert_is_the_walk(clip, walk)
    assert report.ignored_bodies == ("world",) and "world body first" in report.joint_order


def test_a_qpos_only_npz_imports_unverified_with_velocities_by_differences(tmp_path, z, walk):
    qpos = np.concatenate([_root(z), z["joint_pos"]], 1)
    unnamed = _save(tmp_path, "qpos", fps=np.array(50.0), qpos=qpos)
    clip, report = import_motion_with_report(unnamed, name=WALK)
    _assert_is_the_walk(clip, walk, velocities=False)
    assert report.fk_pos_mm is None and "not verified" in "\n".join(report.lines())
    # The pinned clip's velocities are central differences too; its root angular velocity repeats
    # the inner value on the two end frames, these are one-sided: compared inside.
    for f in ("joint_vel", "body_lin_vel_w", "body_ang_vel_w"):
        assert (getattr(clip, f) - getattr(walk, f))[1:-1].abs().max().item() < 1e-3, f
    perm = np.roll(np.arange(29), 4)
    named = _save(tmp_path, "qpos_named", fps=np.array(50.0), joint_names=np.array(z["joints"])[perm],
                  joint_pos=np.concatenate([_root(z), z["joint_pos"][:, perm]], 1))
    _assert_is_the_walk(import_motion(named, name=WALK), walk, velocities=False)


def test_a_root_in_separate_arrays_and_a_canonical_clip_import(tmp_path, z, walk):
    separate = _save(tmp_path, "separate", fps=np.array(50.0), joint_names=np.array(z["joints"]),
                     root_pos=z["body_pos_w"][:, 0], root_quat=z["body_quat_w"][:, 0], joint_pos=z["joint_pos"],
                     joint_vel=z["joint_vel"])
    clip, report = import_motion_with_report(separate, name=WALK)
    _assert_is_the_walk(clip, walk, velocities=False)
    assert report.root == "root_pos / root_quat"
    clip, report = import_motion_with_report(pinned_clip_paths(fetch=False)[WALK])
    _assert_is_the_walk(clip, walk)
    assert report.source.startswith("canonical clip")


def test_the_cli_reports_the_ignored_bodies_and_the_fk_difference(tmp_path, z, capsys):
    names, bodies = _with_extra_bodies(z)
    path = _save(tmp_path, "holosoma", fps=np.array([50]), joint_names=np.array(z["joints"]),
                 body_names=np.array(names), joint_pos=z["joint_pos"], **bodies, junk=np.zeros(3))
    assert motion_cli(["import", str(path), "-o", str(tmp_path / "out.npz")]) == 0
    out = capsys.readouterr().out
    assert f"ignored source bodies (not in the G1 model): {['world', *SPHERES]}" in out
    assert re.search(r"source body poses vs the model's FK: up to [0-9.e-]+ mm, [0-9.e-]+ deg over 30 bodies", out)
    assert "limit 1 mm, 0.0573 deg" in out and "ignored keys: ['junk']" in out


# --- files that are not what they say are refused -------------------------------------------------

def test_joint_names_that_do_not_say_what_the_columns_hold_are_refused_naming_the_figure(tmp_path, z, capsys):
    # The columns in Isaac Lab's order, the names in the model's: the classic mix-up.
    j = _cols(z["joints"], ISAACLAB_JOINTS)
    names, bodies = _with_extra_bodies(z)
    path = _save(tmp_path, "mislabelled", fps=np.array([50]), joint_names=np.array(z["joints"]),
                 body_names=np.array(names), joint_pos=z["joint_pos"][:, j], **bodies)
    out = tmp_path / "out.npz"
    assert motion_cli(["import", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    figure = re.search(r"up to ([0-9.e+]+) mm and ([0-9.e+]+) deg \(worst (\w+), frame (\d+)\)", err)
    assert str(path) in err and figure, err
    assert float(figure[1]) > 100 and float(figure[2]) > 10  # a wrong order is far off, not marginal
    assert "the limit is 1 mm and 0.0573 deg" in err and "joint_names or body_names do not say" in err
    assert not out.exists()


def test_unnamed_joints_in_one_order_and_bodies_in_the_other_are_refused(tmp_path, z):
    j = _cols(z["joints"], ISAACLAB_JOINTS)
    path = _save(tmp_path, "mixed", fps=np.array([50]), joint_pos=z["joint_pos"][:, j],
                 **{f: z[f] for f in BODY_FIELDS})
    with pytest.raises(MotionDataError, match=r"with joints in the model's order.*with joints in Isaac Lab's "
                                              r"breadth-first order.*in neither order"):
        import_motion(path)


def _other_model_file(tmp_path, z, thigh_m):
    """The walk's root and joints, its body poses from a G1 whose left thigh is ``thigh_m`` longer."""
    model = mujoco.MjModel.from_xml_path(str(g1_scene_path()))
    model.body_pos[model.body("left_knee_link").id, 2] -= thigh_m
    fk = kin.forward_kinematics(z["body_pos_w"][:, 0].astype(np.float64), z["body_quat_w"][:, 0].astype(np.float64),
                                z["joint_pos"].astype(np.float64), model=model)
    return _save(tmp_path, f"other_{thigh_m}", fps=np.array([50]), joint_pos=z["joint_pos"],
                 body_pos_w=fk["body_pos_w"].astype(np.float32), body_quat_w=fk["body_quat_w"].astype(np.float32))


def test_another_robot_model_is_refused_at_a_2_mm_link_and_accepted_at_half_a_millimetre(tmp_path, z):
    # (mutant: the position limit read in metres, or the distance not converted to millimetres)
    with pytest.raises(MotionDataError, match=r"up to 2(\.\d+)? mm .*worst left_\w+_link.*another robot model"):
        import_motion(_other_model_file(tmp_path, z, 0.002))
    _, report = import_motion_with_report(_other_model_file(tmp_path, z, 0.0005))
    assert 0.4 < report.fk_pos_mm < 0.6, report.lines()


# --- bounded allocation ---------------------------------------------------------------------------

def _npz_with_a_lying_member(path, arrays, key, shape, payload=800_000):
    """An NPZ of ``arrays`` plus member ``key`` whose header declares ``shape`` float32 but which
    holds only ``payload`` bytes (the file stays small; loading it as declared would not)."""
    with zipfile.ZipFile(path, "w") as zf:
        for k, v in arrays.items():
            with zf.open(f"{k}.npy", "w") as f:
                np.lib.format.write_array(f, np.asanyarray(v), allow_pickle=False)
        with zf.open(f"{key}.npy", "w") as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": shape})
            f.write(b"\0" * payload)
    return path


def test_an_npz_declaring_4e9_frames_is_refused_before_anything_is_allocated(tmp_path, z, capsys):
    # (mutant: the header check skipped -> numpy tries to allocate 432 GiB)
    path = _npz_with_a_lying_member(tmp_path / "huge.npz", {"fps": np.array([50.0]),
                                                            **{f: z[f] for f in BODY_FIELDS}},
                                    "joint_pos", (4_000_000_000, 29))
    assert path.stat().st_size < 0.9e6 + sum(z[f].nbytes for f in BODY_FIELDS)
    started = time.perf_counter()
    assert motion_cli(["import", str(path), "-o", str(tmp_path / "out.npz")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: joint_pos declares shape (4000000000, 29) float32 (432 GiB)" in err
    assert f"over the limit of {MAX_CLIP_FRAMES} frames a clip (MAX_CLIP_FRAMES)" in err
    assert time.perf_counter() - started < 5 and not (tmp_path / "out.npz").exists()


def test_a_canonical_clip_with_a_huge_header_is_refused_by_every_loader_naming_it(tmp_path, z, walk, capsys,
                                                                                   make_env):
    raw = read_npz(pinned_clip_paths(fetch=False)[WALK])
    path = _npz_with_a_lying_member(tmp_path / "huge_clip.npz", {k: v for k, v in raw.items() if k != "joint_vel"},
                                    "joint_vel", (4_000_000_000, 29))
    needle = f"{path}: joint_vel declares shape (4000000000, 29)"
    for load in (load_clip, load_library, lambda p: import_motion(p)):
        with pytest.raises(MotionDataError, match=re.escape(needle)):
            load(path)
    assert motion_cli(["check", str(path)]) == 2 and needle in capsys.readouterr().err
    # A task naming it refuses it as the clip's fault, before any memory is the envs' to blame.
    with pytest.raises(ValueError, match=r"commands term 'motion': " + re.escape(needle) + ".*MAX_CLIP_FRAMES"):
        make_env(task="g1_motion_tracking", num_envs=2, overrides={"commands.motion.clips": [str(path)],
                                                                   "validate_actions": False})


def test_npz_arrays_over_the_byte_limit_are_refused_naming_it(tmp_path, z, monkeypatch):
    monkeypatch.setattr("unilab.assets.motion.io.MAX_NPZ_BYTES", 2**19)  # the walk's arrays: 0.8 MB
    path = _save(tmp_path, "mjlab", fps=np.array([50]), **{f: z[f] for f in FIELDS})
    with pytest.raises(MotionDataError, match=r"mjlab.npz: body_\w+ declares .* more than the limit of 0.5 MiB "
                                              r"\(MAX_NPZ_BYTES\)"):
        import_motion(path)


def _csv(tmp_path, z, rows):
    data = np.concatenate([_root(z)[:, [0, 1, 2, 4, 5, 6, 3]], z["joint_pos"]], 1)
    data = np.resize(data, (rows, data.shape[1]))
    data[:, 3:7] /= np.linalg.norm(data[:, 3:7], axis=1, keepdims=True)
    path = tmp_path / f"rows{rows}.csv"
    np.savetxt(path, data, delimiter=",", fmt="%.6g")
    return path


def test_a_csv_resampled_past_the_frame_limit_is_refused_before_resampling(tmp_path, z, capsys):
    # (mutant: the length checked after resampling -> 3 million frames allocated and run through FK)
    path = _csv(tmp_path, z, 3000)
    started = time.perf_counter()
    assert motion_cli(["import", str(path), "--fps", "1", "--out-fps", "1000", "-o", str(tmp_path / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "3000 source frames at --fps 1 (2999 s) give 2999001 frames at --out-fps 1000" in err
    assert f"over the limit of {MAX_CLIP_FRAMES} frames a clip" in err
    assert time.perf_counter() - started < 5
    assert import_motion(path, fps=30, out_fps=50).num_frames == 4999  # the same file at sane rates imports


def test_a_csv_over_the_row_or_byte_limit_is_refused_before_parsing(tmp_path, z, monkeypatch):
    path = _csv(tmp_path, z, 300)
    monkeypatch.setattr("unilab.assets.motion.importers.MAX_CLIP_FRAMES", 200)
    with pytest.raises(MotionDataError, match="300 rows, over the limit of 200 frames a clip"):
        import_motion(path)
    monkeypatch.setattr("unilab.assets.motion.importers.MAX_CSV_BYTES", 1000)
    with pytest.raises(MotionDataError, match=r"bytes, over the limit of 1000 bytes a CSV clip \(MAX_CSV_BYTES\)"):
        import_motion(path)


# --- export-csv takes pinned names ------------------------------------------------------------------

def test_export_csv_takes_a_pinned_clip_name(tmp_path, walk, capsys):
    out = tmp_path / "walk.csv"
    assert motion_cli(["export-csv", WALK, str(out)]) == 0
    assert out.read_text() == export_csv(walk, tmp_path / "direct.csv").read_text()
    assert motion_cli(["export-csv", "no_such_clip", str(tmp_path / "x.csv")]) == 2
    assert "neither a clip file nor a pinned clip name" in capsys.readouterr().err
