"""unilab-eval runs the checkpoint task's own evaluation, on several backends side by side."""

from __future__ import annotations

import json

import pytest
import torch
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import train as train_cli

QUICK = ["eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]


@pytest.fixture(scope="module")
def g1_checkpoint(tmp_path_factory):
    pytest.importorskip("unilab")
    out = tmp_path_factory.mktemp("eval") / "run"
    args = ["--task", "g1_walk_flat", "--backend", "mujoco", "--algo", "fastsac", "--num-envs", "4", "--steps", "32",
            "--out", str(out), "--no-progress", "--no-tensorboard", "batch_size=16", "learning_starts=16",
            "actor_width=16", "critic_width=16"]
    assert train_cli.main(args) == 0
    torch.set_num_threads(1)
    return out / "checkpoint.pt"


def test_the_sweep_runs_on_two_backends_and_reports_every_command(g1_checkpoint, tmp_path, capsys):
    out = tmp_path / "eval"
    code = eval_cli.main(["--checkpoint", str(g1_checkpoint), "--backends", "mujoco,mjwarp", "--out", str(out), *QUICK])
    assert code == 1  # a 32-step policy does not walk: it ran and failed
    report = json.loads((out / "report.json").read_text())
    assert report["evaluated_on"] == "g1_walk_flat_play" and set(report["reports"]) == {"mujoco", "mjwarp"}
    mujoco, mjwarp = report["reports"]["mujoco"], report["reports"]["mjwarp"]
    assert [c["command"] for c in mujoco["cases"]] == [c["command"] for c in mjwarp["cases"]]
    assert len(mujoco["cases"]) == 17 and report["evaluation_options"]["seconds"] == "0.4"
    assert (out / "report.png").stat().st_size > 10_000
    # Each backend's own facts at the end: how many physics steps it took, whether it altered any
    # world's physics, and (mjwarp) whether it stepped from its captured graph.
    for backend in (mujoco, mjwarp):  # the commands run side by side: 0.4 s (settling included) of 50-Hz env steps
        assert backend["simulator"]["altered_worlds"] == 0 and backend["simulator"]["physics_steps"] == 20 * 4
    # Eager only with the reason why (a failed capture on this machine's warp would say so).
    assert (mjwarp["simulator"]["step_mode"] == "eager") == (mjwarp["simulator"]["eager_reason"] is not None)
    printed = capsys.readouterr()
    assert "mujoco: FAILED" in printed.out and "mjwarp: FAILED" in printed.out
    # Beside the verdict, the sweep's figure over all commands: its signed yaw-rate offset.
    assert f"mujoco: FAILED ang_vel_offset {mujoco['overall']['ang_vel_offset']:.4g}\n" in printed.out
    assert "altered the physics" not in printed.err


def test_an_evaluation_whose_simulator_altered_worlds_says_so_out_loud(g1_checkpoint, tmp_path, capsys, monkeypatch):
    from unilab.env import ManagerBasedRlEnv

    monkeypatch.setattr(ManagerBasedRlEnv, "simulator_diagnostics", lambda self: {"physics_steps": 1, "altered_worlds": 2})
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(g1_checkpoint), "--out", str(out), "--no-plot", *QUICK]) == 1
    assert json.loads((out / "report.json").read_text())["reports"]["mujoco"]["simulator"]["altered_worlds"] == 2
    err = capsys.readouterr().err
    assert "unilab-eval: warning: the simulator altered the physics of 2 of 17 worlds" in err
    assert f"{out / 'report.json'}'s simulator entry has the details" in err


@pytest.mark.parametrize(("extra", "message"), [
    (["--backends", "mujoco,mujoco"], "distinct comma-separated backend names"),
    (["eval.envs=3"], "evaluation options ['envs'] are unknown"),
    (["--task", "nope"], "unknown task 'nope'"),
    (["rewards.nope=1"], "valid keys"),
])
def test_bad_input_is_exit_2_naming_it(g1_checkpoint, tmp_path, capsys, extra, message):
    assert eval_cli.main(["--checkpoint", str(g1_checkpoint), "--out", str(tmp_path / "e"), *QUICK, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_training_overrides_of_terms_the_play_variant_removed_are_dropped_and_reported(g1_checkpoint, tmp_path,
                                                                                      capsys):
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    document = load_checkpoint(g1_checkpoint)
    stages = "[{'step': 0, 'lin_vel_x': (-1.5, 2.0)}]"
    document["env_overrides"] = {**document["env_overrides"], "curriculum.command_ranges.params.stages": stages,
                                 "events.push.interval_range_s": "(2.0, 3.0)", "episode_length_s": "30"}
    path = tmp_path / "with-curriculum.pt"
    save_checkpoint(path, document)
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(path), "--out", str(out), *QUICK]) == 1
    report = json.loads((out / "report.json").read_text())
    # The episode length is the evaluation's own: a training one would time rows out mid-sweep.
    assert report["training_overrides_dropped"] == ["curriculum.command_ranges.params.stages",
                                                    "events.push.interval_range_s", "episode_length_s"]
    assert "episode_length_s" not in report["env_overrides"]
    rows = json.loads((out / "over-time.json").read_text())["checkpoints"]  # one checkpoint, one row
    assert [(r["checkpoint"], r["mujoco"]["cases"]) for r in rows] == [("with-curriculum.pt", 17)]
    assert "dropped: curriculum.command_ranges.params.stages, events.push.interval_range_s" in capsys.readouterr().out


def test_a_run_trained_with_a_graphed_env_is_judged_played_and_exported_on_the_cpu(g1_checkpoint, tmp_path):
    # How the training env ran (CUDA graphs, a GPU-only setting) is not part of the task: the
    # commands that rebuild the env on a device of their own choosing leave it out.
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint
    from unilab_rl.cli import export as export_cli
    from unilab_rl.cli import play as play_cli

    document = load_checkpoint(g1_checkpoint)
    document["env_overrides"] = {**document["env_overrides"], "cuda_graph": "true", "episode_length_s": "30"}
    path = tmp_path / "graphed" / "checkpoint.pt"
    path.parent.mkdir()
    save_checkpoint(path, document)
    assert eval_cli.main(["--checkpoint", str(path), "--out", str(tmp_path / "eval"), *QUICK]) == 1  # judged
    report = json.loads((tmp_path / "eval" / "report.json").read_text())
    assert report["env_overrides"] == {}  # the evaluation keeps its own episode length too
    assert play_cli.main(["--checkpoint", str(path), "--episodes", "1", "--num-envs", "2"]) == 0
    assert export_cli.main(["--checkpoint", str(path), "--verify-steps", "4"]) == 0
    metadata = json.loads((path.parent / "policy.json").read_text())
    assert metadata["env_overrides"] == {"episode_length_s": "30"}


def _run_with_snapshots(checkpoint, tmp_path):
    """A run directory holding the checkpoint as two time snapshots (7.5 s, 90 s), one by env
    steps (200, taken at 40 s, between them) and a final one (120 s)."""
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    run = tmp_path / "run"
    run.mkdir()
    document = load_checkpoint(checkpoint)
    for name, wall_s, env_steps in [("checkpoint-90s.pt", 90.0, 900), ("checkpoint-200steps.pt", 40.0, 200),
                                    ("checkpoint-7.5s.pt", 7.5, 100), ("checkpoint.pt", 120.0, 1200)]:
        document["counters"]["wall_s"], document["counters"]["env_steps"] = wall_s, env_steps
        save_checkpoint(run / name, document)
    return run


def test_a_run_directory_is_judged_snapshot_by_snapshot_in_training_order(g1_checkpoint, tmp_path, capsys):
    run = _run_with_snapshots(g1_checkpoint, tmp_path)
    (run / "checkpoint-later.pt").write_bytes(b"not a snapshot name: left alone")
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(run), "--out", str(out), "--no-plot", *QUICK]) == 1
    over_time = json.loads((out / "over-time.json").read_text())
    rows = over_time["checkpoints"]
    # The two kinds of snapshot interleave by the experience each holds.
    assert [r["checkpoint"] for r in rows] == ["checkpoint-7.5s.pt", "checkpoint-200steps.pt", "checkpoint-90s.pt",
                                               "checkpoint.pt"]
    assert [r["trained_wall_s"] for r in rows] == [7.5, 40.0, 90.0, 120.0]
    assert [r["trained_env_steps"] for r in rows] == [100, 200, 900, 1200]
    assert all(r["mujoco"]["cases"] == 17 for r in rows)
    assert all(set(r["mujoco"]["overall"]) == {"ang_vel_offset"} for r in rows)  # the sweep's figure over its commands
    for name in ("checkpoint-7.5s", "checkpoint-200steps", "checkpoint-90s", "checkpoint"):
        assert json.loads((out / name / "report.json").read_text())["reports"]["mujoco"]["cases"]
    assert "over training time" in capsys.readouterr().out


def test_a_run_directory_mixing_runs_or_without_checkpoints_is_refused_before_judging(g1_checkpoint, tmp_path, capsys):
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    empty = tmp_path / "empty"
    empty.mkdir()
    assert eval_cli.main(["--checkpoint", str(empty), "--out", str(tmp_path / "e1"), *QUICK]) == 2
    assert "a run directory without checkpoint.pt or snapshots" in capsys.readouterr().err
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    document = load_checkpoint(g1_checkpoint)
    save_checkpoint(mixed / "checkpoint-60s.pt", document)
    document["env_overrides"] = {**document["env_overrides"], "episode_length_s": "12"}
    save_checkpoint(mixed / "checkpoint.pt", document)
    assert eval_cli.main(["--checkpoint", str(mixed), "--out", str(tmp_path / "e2"), *QUICK]) == 2
    assert "checkpoint.pt is from another run than checkpoint-60s.pt" in capsys.readouterr().err
    assert not (tmp_path / "e1").exists() and not (tmp_path / "e2").exists()


def test_a_tracking_run_over_time_carries_its_success_rate_and_mpkpe(tmp_path, capsys):
    pytest.importorskip("unilab")
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    run = tmp_path / "run"
    # Trained on a library of two pinned clips: the evaluation counts the run's clips, no option needed.
    clips = "commands.motion.clips=['walk_forward_loop_002__A022','idle_turn_270_001__A048']"
    args = ["--task", "g1_motion_tracking", "--backend", "mujoco", "--algo", "fastsac", "--num-envs", "2", "--steps",
            "8", "--out", str(run), "--no-progress", "--no-tensorboard", "batch_size=8", "learning_starts=8",
            "actor_width=16", "critic_width=16", clips]
    assert train_cli.main(args) == 0
    save_checkpoint(run / "checkpoint-1s.pt", load_checkpoint(run / "checkpoint.pt"))
    out = tmp_path / "eval"
    assert eval_cli.main(["--checkpoint", str(run), "--out", str(out), "--no-plot", "eval.envs_per_clip=1"]) == 1
    rows = json.loads((out / "over-time.json").read_text())["checkpoints"]
    assert [r["checkpoint"] for r in rows] == ["checkpoint-1s.pt", "checkpoint.pt"]
    for row in rows:  # an 8-step policy falls off the clips: 0% success, a large error
        overall = row["mujoco"]["overall"]
        assert overall["success_rate"] == 0.0 and overall["mpkpe_mm"] > 10.0 and row["mujoco"]["cases"] == 2
    cases = json.loads((out / "checkpoint" / "report.json").read_text())["reports"]["mujoco"]["cases"]
    assert [c["clip"] for c in cases] == ["walk_forward_loop_002__A022", "idle_turn_270_001__A048"]
    assert "success_rate 0" in capsys.readouterr().out


@pytest.fixture(scope="module")
def exported(g1_checkpoint):
    from unilab_rl.cli import export as export_cli

    out = g1_checkpoint.parent / "policy.pt"
    assert export_cli.main(["--checkpoint", str(g1_checkpoint), "--format", "torchscript", "--out", str(out),
                            "--verify-steps", "0"]) == 0
    return out


def test_an_exported_policy_is_judged_like_its_checkpoint(g1_checkpoint, exported, tmp_path):
    by_checkpoint, by_policy = tmp_path / "checkpoint", tmp_path / "policy"
    assert eval_cli.main(["--checkpoint", str(g1_checkpoint), "--out", str(by_checkpoint), "--no-plot", *QUICK]) == 1
    assert eval_cli.main(["--policy", str(exported), "--out", str(by_policy), "--no-plot", *QUICK]) == 1
    a = json.loads((by_checkpoint / "report.json").read_text())
    b = json.loads((by_policy / "report.json").read_text())
    assert b["policy"] == str(exported) and "checkpoint" not in b
    assert (b["task"], b["algo"], b["trained_env_steps"], b["actor"]) == (
        a["task"], a["algo"], a["trained_env_steps"], a["actor"])
    assert b["trained_wall_s"] == pytest.approx(a["trained_wall_s"])
    cases_a, cases_b = a["reports"]["mujoco"]["cases"], b["reports"]["mujoco"]["cases"]
    assert [c["command"] for c in cases_a] == [c["command"] for c in cases_b]
    for x, y in zip(cases_a, cases_b):  # the same policy on the same env: float rounding apart at most
        assert y["fall_rate"] == x["fall_rate"]
        assert (y["achieved"] is None) == (x["achieved"] is None)
        if x["achieved"] is not None:
            assert y["achieved"] == pytest.approx(x["achieved"], abs=1e-3)


def _planted_export(exported, tmp_path, edit):
    """A copy of ``exported`` whose metadata ``edit`` changed."""
    from unilab_rl.export import export_policy, read_metadata

    metadata = read_metadata(exported)
    edit(metadata)
    module = torch.jit.load(str(exported))
    path = tmp_path / "planted.pt"
    export_policy(module, metadata["input"]["shape"][1], path, "torchscript", metadata)
    return path


def _fingerprint(metadata):
    metadata["task_fingerprint"] = "0" * 64


def _layout(metadata):
    metadata["observation"]["terms"][0]["width"] += 1


@pytest.mark.parametrize(("edit", "message"), [
    (_fingerprint, "the task's meaning changed since"),
    (_layout, "are not the exported layout"),
])
def test_an_exported_policy_that_no_longer_fits_its_task_is_refused(exported, tmp_path, capsys, edit, message):
    planted = _planted_export(exported, tmp_path, edit)
    assert eval_cli.main(["--policy", str(planted), "--out", str(tmp_path / "e"), *QUICK]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


@pytest.mark.parametrize("damage", ["random bytes", "half a file"])
def test_an_onnx_file_that_does_not_parse_is_bad_input(g1_checkpoint, tmp_path, capsys, damage):
    pytest.importorskip("onnx")
    from unilab_rl.cli import export as export_cli

    good = tmp_path / "policy.onnx"
    assert export_cli.main(["--checkpoint", str(g1_checkpoint), "--format", "onnx", "--out", str(good),
                            "--verify-steps", "0"]) == 0
    data = good.read_bytes()
    bad = tmp_path / "bad.onnx"
    noise = bytes((i * 7919 + 13) % 256 for i in range(5000))
    bad.write_bytes(noise if damage == "random bytes" else data[: len(data) // 2])
    assert eval_cli.main(["--policy", str(bad), "--out", str(tmp_path / "e"), *QUICK]) == 2
    err = capsys.readouterr().err
    assert "not a readable ONNX file" in err and "Traceback" not in err, err
    assert not (tmp_path / "e").exists()


def test_a_file_that_is_not_an_exported_policy_is_bad_input(g1_checkpoint, tmp_path, capsys):
    assert eval_cli.main(["--policy", str(g1_checkpoint), "--out", str(tmp_path / "e"), *QUICK]) == 2
    assert "not an exported policy with metadata" in capsys.readouterr().err
    assert eval_cli.main(["--policy", str(tmp_path / "missing.onnx"), *QUICK]) == 2
    assert "missing.onnx: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        eval_cli.main(["--policy", str(g1_checkpoint), "--checkpoint", str(g1_checkpoint)])
    assert exit_.value.code == 2
    assert not (tmp_path / "e").exists()


def test_a_run_directory_exported_then_judged_by_its_policy_files_over_time(g1_checkpoint, tmp_path, capsys):
    from unilab_rl.cli import export as export_cli

    run = _run_with_snapshots(g1_checkpoint, tmp_path)
    assert export_cli.main(["--checkpoint", str(run), "--out", str(tmp_path / "one.pt")]) == 2  # a folder's --out
    assert "with a run directory, --out names a folder" in capsys.readouterr().err
    assert export_cli.main(["--checkpoint", str(run), "--format", "torchscript", "--verify-steps", "4"]) == 0
    assert sorted(p.name for p in run.glob("policy*.pt")) == ["policy-200steps.pt", "policy-7.5s.pt", "policy-90s.pt",
                                                              "policy.pt"]
    out = tmp_path / "eval"
    assert eval_cli.main(["--policy", str(run), "--out", str(out), "--no-plot", *QUICK]) == 1
    rows = json.loads((out / "over-time.json").read_text())["checkpoints"]
    assert [r["checkpoint"] for r in rows] == ["policy-7.5s.pt", "policy-200steps.pt", "policy-90s.pt", "policy.pt"]
    assert [r["trained_wall_s"] for r in rows] == [7.5, 40.0, 90.0, 120.0]
    assert json.loads((out / "policy-90s" / "report.json").read_text())["policy"] == str(run / "policy-90s.pt")
    assert "over training time" in capsys.readouterr().out


def test_a_policy_folder_of_two_formats_or_none_is_refused(exported, tmp_path, capsys):
    import shutil

    both = tmp_path / "both"
    both.mkdir()
    shutil.copy(exported, both / "policy.pt")
    (both / "policy.onnx").write_bytes(b"")
    empty = tmp_path / "empty"
    empty.mkdir()
    for folder, found in ((both, "['.onnx', '.pt']"), (empty, "none")):
        assert eval_cli.main(["--policy", str(folder), "--out", str(tmp_path / "e"), *QUICK]) == 2
        assert f"found {found}" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_run_with_an_averaged_policy_is_judged_by_it_and_by_its_latest_actor_on_request(g1_checkpoint, tmp_path,
                                                                                         capsys):
    from unilab_rl.checkpoint import load_checkpoint, save_checkpoint

    # Plant an average far from the actor: its output layer's bias raised by 1, so every action moves
    # well away from the barely trained actor's near-zero ones.
    document = load_checkpoint(g1_checkpoint)
    document["algo_config"] = {**document["algo_config"], "averaged_policy_tau": 0.5}
    averaged = {k: v.clone() for k, v in document["agent"]["actor"].items()}
    averaged[[k for k in averaged if k.endswith("bias")][-1]] += 1.0
    document["agent"]["averaged_actor"] = averaged
    path = tmp_path / "averaged.pt"
    save_checkpoint(path, document)
    reports = {}
    for name, extra in (("averaged", []), ("latest", ["--latest-actor"])):
        assert eval_cli.main(["--checkpoint", str(path), "--out", str(tmp_path / name), "--no-plot", *QUICK,
                              *extra]) == 1
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
        assert reports[name]["actor"] == name
        assert f"{name} actor" in capsys.readouterr().out
    achieved = {name: [c["achieved"] for c in r["reports"]["mujoco"]["cases"]] for name, r in reports.items()}
    assert achieved["averaged"] != achieved["latest"]
    assert json.loads((tmp_path / "latest" / "over-time.json").read_text())["checkpoints"][0]["actor"] == "latest"


def test_latest_actor_is_refused_for_an_exported_policy(exported, tmp_path, capsys):
    assert eval_cli.main(["--policy", str(exported), "--latest-actor", "--out", str(tmp_path / "e"), *QUICK]) == 2
    assert "--latest-actor: only for --checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


def test_a_mirror_averaged_judgement_acts_differently_and_says_so(g1_checkpoint, exported, tmp_path, capsys):
    reports = {}
    for name, judged, extra in (("plain", ["--checkpoint", str(g1_checkpoint)], []),
                                ("averaged", ["--checkpoint", str(g1_checkpoint)], ["--mirror-averaged"]),
                                ("export", ["--policy", str(exported)], ["--mirror-averaged"])):
        assert eval_cli.main([*judged, "--out", str(tmp_path / name), "--no-plot", *QUICK, *extra]) == 1
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
        assert reports[name]["mirror_averaged"] == bool(extra)
        assert json.loads((tmp_path / name / "over-time.json").read_text())["checkpoints"][0]["mirror_averaged"] \
            == bool(extra)
        assert ("latest actor, mirror-averaged" in capsys.readouterr().out) == bool(extra)
    achieved = {name: [c["achieved"] for c in r["reports"]["mujoco"]["cases"]] for name, r in reports.items()}
    assert achieved["averaged"] != achieved["plain"]  # the barely trained actor is not symmetric
    # The checkpoint and its export averaged alike: float rounding apart at most.
    for x, y in zip(achieved["averaged"], achieved["export"]):
        assert x == pytest.approx(y, abs=1e-3)


def test_an_export_averaged_with_its_mirror_is_judged_so_without_the_flag(g1_checkpoint, tmp_path):
    from unilab_rl.cli import export as export_cli

    exported = tmp_path / "policy.pt"
    assert export_cli.main(["--checkpoint", str(g1_checkpoint), "--format", "torchscript", "--out", str(exported),
                            "--verify-steps", "0", "--mirror-averaged"]) == 0
    reports = {}
    for name, judged, extra in (("checkpoint", ["--checkpoint", str(g1_checkpoint)], ["--mirror-averaged"]),
                                ("export", ["--policy", str(exported)], [])):
        assert eval_cli.main([*judged, "--out", str(tmp_path / name), "--no-plot", *QUICK, *extra]) == 1
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    assert reports["export"]["mirror_averaged"] is True
    for x, y in zip(*([c["achieved"] for c in r["reports"]["mujoco"]["cases"]] for r in reports.values())):
        assert x == pytest.approx(y, abs=1e-3)


def test_mirror_averaging_a_task_without_a_mirror_is_exit_2_naming_it(g1_checkpoint, tmp_path, capsys, monkeypatch):
    from unilab.env import ManagerBasedRlEnv

    monkeypatch.setattr(ManagerBasedRlEnv, "_mirrors", lambda self: None)
    assert eval_cli.main(["--checkpoint", str(g1_checkpoint), "--mirror-averaged", "--out", str(tmp_path / "e"),
                          *QUICK]) == 2
    assert "--mirror-averaged: task 'g1_walk_flat_play' declares no left-right mirror" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()
