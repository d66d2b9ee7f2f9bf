"""An unnamed (mjlab or BeyondMimic layout) NPZ is only accepted when its columns are in the model's
or Isaac Lab's order (both joints and bodies), and a clip is only saved when load_clip can read it back."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from fk_clip import ISAACLAB_ORDER
from unilab.assets import G1_JOINT_NAMES
from unilab.assets.motion import MotionDataError, import_motion, load_clip, pinned_clip_paths, save_clip
from unilab.assets.motion.io import read_npz

WALK = "walk_forward_loop_002__A022"
FIELDS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


@pytest.fixture(scope="module")
def raw():
    z = read_npz(pinned_clip_paths(fetch=False)[WALK])
    return {"fps": np.array([50.0]), **{k: z[k] for k in FIELDS}}


def _import(tmp_path, arrays):
    np.savez(tmp_path / "unnamed.npz", **arrays)
    return import_motion(tmp_path / "unnamed.npz", name=WALK)


def test_an_unnamed_npz_in_model_order_still_imports(tmp_path, raw):
    clip = _import(tmp_path, raw)
    assert np.array_equal(clip.joint_pos.numpy(), raw["joint_pos"])


def test_an_unnamed_npz_with_joints_in_isaaclab_order_is_refused_not_scrambled(tmp_path, raw):
    perm = [G1_JOINT_NAMES.index(n) for n in ISAACLAB_ORDER]
    bad = {**raw, "joint_pos": raw["joint_pos"][:, perm], "joint_vel": raw["joint_vel"][:, perm]}
    with pytest.raises(MotionDataError, match="forward kinematics.*in neither order .give joint_names and body_names"):
        _import(tmp_path, bad)


def test_an_unnamed_npz_with_xyzw_quaternions_is_refused(tmp_path, raw):
    bad = {**raw, "body_quat_w": raw["body_quat_w"][..., [1, 2, 3, 0]]}
    with pytest.raises(MotionDataError, match="forward kinematics"):
        _import(tmp_path, bad)


def test_an_unnamed_npz_with_bodies_in_another_order_is_refused(tmp_path, raw):
    order = np.r_[0, np.arange(1, 30)[::-1]]  # root kept first, the rest reversed
    bad = {**raw, **{k: raw[k][:, order] for k in FIELDS if k.startswith("body")}}
    with pytest.raises(MotionDataError, match="forward kinematics"):
        _import(tmp_path, bad)


@pytest.mark.parametrize("fps", [0.5, 2000.0])
def test_save_refuses_an_fps_that_load_would_refuse(tmp_path, fps):
    walk = load_clip(pinned_clip_paths(fetch=False)[WALK])
    with pytest.raises(MotionDataError, match="fps"):
        save_clip(dataclasses.replace(walk, fps=fps), tmp_path / "c.npz")
    assert not list(tmp_path.iterdir())  # nothing written


def test_an_unnamed_npz_with_a_wrong_quaternion_width_is_refused_before_fk(tmp_path, raw):
    bad = {**raw, "body_quat_w": raw["body_quat_w"][..., :3]}
    with pytest.raises(MotionDataError, match=r"body_quat_w has shape \(455, 30, 3\), expected \(455, 30, 4\)"):
        _import(tmp_path, bad)
