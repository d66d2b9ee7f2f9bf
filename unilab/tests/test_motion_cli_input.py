"""unilab-motion on bad input: rate flags that would be ignored or only relabel, too-short resampling,
output paths that cannot be written, malformed canonical keys, byte-string names, library refusals
that name the files, and ``check`` going on past an unreadable clip. Clips are made here by forward
kinematics (tests/fk_clip.py), so these tests need no downloaded data."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets import G1_JOINT_NAMES
from unilab.assets.motion import MotionDataError, export_csv, import_motion, load_clip, load_library, save_clip
from unilab.assets.motion.cli import main as motion_cli
from unilab.assets.motion.io import read_npz
from unilab.tasks.tracking.mdp.frame_table import FrameTable


@pytest.fixture(scope="module")
def clip30():
    return synthetic_clip(frames=60, fps=30.0, name="sway30")


@pytest.fixture
def files(tmp_path, clip30):
    """A canonical 30 fps clip, its CSV, and an output folder that must stay empty on a refusal."""
    (tmp_path / "out").mkdir()
    return {"npz": save_clip(clip30, tmp_path / "sway30.npz"), "csv": export_csv(clip30, tmp_path / "sway30.csv"),
            "out": tmp_path / "out"}


def _refused(argv, capsys, *needles):
    assert motion_cli([str(a) for a in argv]) == 2, argv
    err = capsys.readouterr().err
    assert all(n in err for n in needles), (argv, err)
    assert "Traceback" not in err


def test_the_fps_mismatch_hint_says_reimport_the_csv_with_out_fps(clip30):
    with pytest.raises(ValueError, match=r"at 30 fps.*re-import its source CSV.*--out-fps 50") as info:
        FrameTable([clip30], clip30.joint_names, "pelvis", ("pelvis",), 50.0, torch.device("cpu"), "test")
    assert "import --fps" not in str(info.value)


def test_import_refuses_fps_on_an_npz_that_stores_its_own(files, capsys):
    _refused(["import", files["npz"], "--fps", "50", "-o", files["out"] / "a.npz"], capsys, "--fps 50", "own fps")
    z = read_npz(files["npz"])
    mjlab = files["out"].parent / "mjlab.npz"
    np.savez(mjlab, fps=np.array([30.0]), **{k: z[k] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w",
                                                                "body_lin_vel_w", "body_ang_vel_w")})
    _refused(["import", mjlab, "--fps", "30", "-o", files["out"] / "b.npz"], capsys, "--fps")
    assert not any(files["out"].iterdir())


def test_import_refuses_an_explicit_out_fps_on_npz_input(files, capsys):
    _refused(["import", files["npz"], "--out-fps", "50", "-o", files["out"] / "a.npz"], capsys, "--out-fps")
    assert not any(files["out"].iterdir())
    with pytest.raises(MotionDataError, match="--out-fps"):
        import_motion(files["npz"], out_fps=50.0)
    assert import_motion(files["npz"]).fps == 30.0  # no --out-fps: the NPZ keeps its rate


def test_csv_resampled_to_fewer_than_two_frames_is_refused_naming_out_fps(files, capsys):
    two = files["out"].parent / "two.csv"
    two.write_text("\n".join(files["csv"].read_text().splitlines()[:2]) + "\n")
    _refused(["import", two, "--fps", "120", "-o", files["out"] / "a.npz"], capsys, "--out-fps 50", "2 source frames")
    _refused(["import", two, "--out-fps", "1", "-o", files["out"] / "b.npz"], capsys, "--out-fps 1")
    assert not any(files["out"].iterdir())


def test_output_paths_that_cannot_be_written_are_refused_naming_the_flag(files, capsys):
    folder, afile = files["out"] / "dir.npz", files["out"] / "afile"
    folder.mkdir()
    afile.write_text("a file")
    for argv, named in ((["import", files["csv"], "-o", folder, "--overwrite"], f"--out {folder}: is a directory"),
                        (["import", files["csv"], "-o", afile / "x.npz"], f"--out {afile / 'x.npz'}"),
                        (["export-csv", files["npz"], folder], f"OUT {folder}: is a directory"),
                        (["export-csv", files["npz"], afile / "x.csv"], f"OUT {afile / 'x.csv'}"),
                        (["check", files["npz"], "--json", folder], f"--json {folder}: is a directory"),
                        (["check", files["npz"], "--json", afile / "r.json"], f"--json {afile / 'r.json'}")):
        _refused(argv, capsys, named)
        assert sorted(p.name for p in files["out"].iterdir()) == ["afile", "dir.npz"] and not any(folder.iterdir())
    report = files["out"] / "new" / "r.json"  # a missing folder is made, as for --out
    assert motion_cli(["check", str(files["npz"]), "--json", str(report)]) == 0
    assert json.loads(report.read_text())[0]["ok"]


@pytest.mark.parametrize("key,value,message", [
    ("format_version", np.array([1, 1]), "format_version must be a 0-d integer"),
    ("format_version", np.str_("abc"), "format_version must be a 0-d integer"),
    ("format_version", np.float64(1.7), "format_version must be a 0-d integer"),
    ("name", np.array(["a", "b"]), "name must be a 0-d string"),
])
def test_a_malformed_format_version_or_name_is_refused_naming_the_key(files, capsys, key, value, message):
    bad = files["out"].parent / "bad.npz"
    np.savez(bad, **{**read_npz(files["npz"]), key: value})
    with pytest.raises(MotionDataError, match=message):
        load_clip(bad)
    _refused(["check", bad], capsys, message)


def test_byte_string_names_in_a_named_npz_are_decoded(files, clip30):
    z = read_npz(files["npz"])
    named = files["out"].parent / "bytes.npz"
    arrays = {k: z[k] for k in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w",
                                "body_ang_vel_w")}
    np.savez(named, fps=30.0, joint_names=np.array(G1_JOINT_NAMES, dtype=np.bytes_),
             body_names=z["body_names"].astype(np.bytes_), **arrays)
    clip = import_motion(named)
    assert clip.joint_names == G1_JOINT_NAMES and clip.body_names == clip30.body_names
    assert torch.equal(clip.joint_pos, clip30.joint_pos)


def test_library_refusals_name_each_clips_path_and_the_differing_names(tmp_path, clip30):
    a = save_clip(synthetic_clip(frames=60, fps=50.0, name="same"), tmp_path / "a" / "same.npz")
    b = save_clip(dataclasses.replace(clip30, name="same"), tmp_path / "b" / "same.npz")
    with pytest.raises(MotionDataError, match="30 fps") as info:
        load_library([a, b])
    assert str(a) in str(info.value) and str(b) in str(info.value)
    renamed = ("foo_joint", *G1_JOINT_NAMES[1:])
    c = save_clip(dataclasses.replace(load_clip(a), joint_names=renamed), tmp_path / "c.npz")
    with pytest.raises(MotionDataError, match=r"only in this clip \['foo_joint'\], only in the first "
                                              rf"\['{G1_JOINT_NAMES[0]}'\]") as info:
        load_library([a, c])
    assert str(a) in str(info.value) and str(c) in str(info.value)


def test_check_reports_every_clip_when_one_is_unreadable_and_exits_with_the_worst(files, capsys):
    junk, relabelled = files["out"].parent / "junk.npz", files["out"].parent / "relabelled.npz"
    junk.write_bytes(b"junk")
    save_clip(dataclasses.replace(load_clip(files["npz"]), fps=60.0, name="relabelled"), relabelled)
    report = files["out"] / "r.json"
    assert motion_cli(["check", str(files["npz"]), str(junk), str(relabelled), "--json", str(report)]) == 2
    captured = capsys.readouterr()
    assert "clip sway30" in captured.out and "clip relabelled" in captured.out
    assert "1/3 clips passed; failed: ['relabelled']; unreadable: [" in captured.out
    assert "not a readable .npz" in captured.err
    entries = json.loads(report.read_text())
    assert [e["ok"] for e in entries] == [True, False, False] and "not a readable .npz" in entries[1]["unreadable"]
    assert motion_cli(["check", str(files["npz"]), str(relabelled)]) == 1  # no unreadable file: a clip failed
