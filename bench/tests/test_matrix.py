"""unilab-bench matrix and compare on synthetic records: the staged budget's verdicts (a planted
-30% on tracking, +3 ms reset_done_ms and a new host sync fail), the noise rule, exit codes,
and the driver's interleaving and absent-case handling without running a process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from unilab_bench import compare, matrix, matrix_figures, matrix_trees, matrix_units

from unilab_rl import machine_info

TRACK, WALK = "flashsac/g1_motion_tracking/mujoco", "fastsac/g1_walk_flat/mujoco"


def side(throughput=(1000.0, 1010.0, 990.0), reset_done=(1.0, 1.0, 1.0), syncs=0.0, redundant=0.0, smoke=False):
    samples = [{"env_steps_per_s_streamed": t, "collector_steps_per_s_no_learning": t / 2,
                "collector_steps_per_s_with_learning": t / 10, "reset_done_ms": r,
                "host_syncs_per_env_step": syncs, "host_syncs_per_env_step_cuda": None,
                "redundant_physics_steps_in_reset": redundant}
               for t, r in zip(throughput, reset_done, strict=True)]
    return {"status": "ok", "smoke": smoke, "samples": samples}


def scaled(factor, base=(1000.0, 1010.0, 990.0)):
    return tuple(v * factor for v in base)


def verdict(base, head, name=TRACK, paired=True):
    return compare.compare_case(name, base, head, paired)


def test_unchanged_passes_and_exits_zero():
    result = compare.compare_records({TRACK: side(), WALK: side()}, {TRACK: side(), WALK: side()}, paired=True)
    assert result["verdict"] == compare.PASS and result["exit_code"] == 0
    assert {m["metric"] for m in result["cases"][0]["metrics"]} >= {
        "env_steps_per_s_streamed", "collector_steps_per_s_with_learning", "reset_done_ms", "host_syncs_per_env_step"}


def test_planted_tracking_throughput_minus_30_percent_is_blocked():
    r = verdict(side(), side(throughput=scaled(0.7)))
    assert r["verdict"] == compare.BLOCKED and "20% allowance" in r["why"]
    assert compare.compare_records({TRACK: side()}, {TRACK: side(throughput=scaled(0.7))}, True)["exit_code"] == 2


def test_tracking_cost_beyond_noise_within_20_percent_uses_the_allowance_and_names_the_follow_up():
    tight = (1000.0, 1001.0, 999.0)
    r = verdict(side(throughput=tight), side(throughput=scaled(0.88, tight)))
    assert r["verdict"] == compare.ALLOWANCE and "optimization follow-up" in r["why"]
    assert compare.compare_records({TRACK: side(tight)}, {TRACK: side(scaled(0.88, tight))}, True)["exit_code"] == 1


def test_walking_allowance_is_ten_percent():
    tight = (1000.0, 1001.0, 999.0)
    assert verdict(side(tight), side(scaled(0.88, tight)), name=WALK)["verdict"] == compare.BLOCKED
    assert verdict(side(tight), side(scaled(0.95, tight)), name=WALK)["verdict"] == compare.ALLOWANCE


def test_learning_beside_collection_is_judged_where_both_records_have_it():
    def overlapped(s, values):
        for sample, v in zip(s["samples"], values, strict=True):
            sample["collector_steps_per_s_with_learning_overlapped"] = v
        return s
    # Only the overlapped mode slows (e.g. a stream hand-off that serializes the learner): blocked.
    r = verdict(overlapped(side(), scaled(0.2)), overlapped(side(), scaled(0.14)))
    assert r["verdict"] == compare.BLOCKED and "collector_steps_per_s_with_learning_overlapped" in r["why"]
    assert verdict(overlapped(side(), scaled(0.2)), overlapped(side(), scaled(0.2)))["verdict"] == compare.PASS
    # A base recorded before the mode existed is not judged on it.
    r = verdict(side(), overlapped(side(), scaled(0.14)))
    assert r["verdict"] == compare.PASS
    assert "collector_steps_per_s_with_learning_overlapped" not in {m["metric"] for m in r["metrics"]}


def test_planted_reset_done_plus_3_ms_is_blocked():
    r = verdict(side(reset_done=(5.0, 5.0, 5.0)), side(reset_done=(8.0, 8.0, 8.0)))
    assert r["verdict"] == compare.BLOCKED and "reset_done_ms" in r["why"]


def test_reset_done_limit_is_the_smaller_of_50_percent_and_2_ms():
    # 1 ms base: the limit is 0.5 ms, so +0.6 ms blocks though it is under 2 ms.
    assert verdict(side(reset_done=(1.0,) * 3), side(reset_done=(1.6,) * 3))["verdict"] == compare.BLOCKED
    assert verdict(side(reset_done=(1.0,) * 3), side(reset_done=(1.4,) * 3))["verdict"] == compare.PASS
    # 10 ms base: the limit is 2 ms.
    assert verdict(side(reset_done=(10.0,) * 3), side(reset_done=(11.9,) * 3))["verdict"] == compare.PASS
    assert verdict(side(reset_done=(10.0,) * 3), side(reset_done=(12.1,) * 3))["verdict"] == compare.BLOCKED


def test_planted_new_host_sync_is_blocked_even_in_a_smoke_case():
    r = verdict(side(), side(syncs=1.0))
    assert r["verdict"] == compare.BLOCKED and "new host sync" in r["why"]
    assert verdict(side(smoke=True), side(syncs=0.5, smoke=True))["verdict"] == compare.BLOCKED
    assert verdict(side(), side(redundant=1.0))["verdict"] == compare.BLOCKED


def test_noise_rule_a_result_inside_noise_passes_only_if_its_worst_paired_sample_is_inside():
    noisy_base = (1000.0, 1300.0, 1000.0)  # 30% spread
    # median cost 0 (inside noise), worst paired sample -23%: not a pass.
    head = (1000.0, 1000.0, 1000.0)
    r = compare.judge_throughput(TRACK, "env_steps_per_s_streamed", list(noisy_base), list(head), True, 0.20)
    assert r["cost_median"] == pytest.approx(0.0) and r["cost_worst"] == pytest.approx(1 - 1000 / 1300)
    assert r["verdict"] == compare.ALLOWANCE and "inside noise" in r["why"]
    # The same median with every paired sample inside the allowance passes.
    r = compare.judge_throughput(TRACK, "env_steps_per_s_streamed", [1000, 1100, 1000], [1000, 1000, 1000], True, 0.20)
    assert r["verdict"] == compare.PASS
    # A worst paired sample beyond the 25% closeout ceiling blocks.
    r = compare.judge_throughput(TRACK, "env_steps_per_s_streamed", [1000, 1500, 1000], [1000, 1000, 1000], True, 0.20)
    assert r["verdict"] == compare.BLOCKED and "ceiling" in r["why"]
    # noise in reset_done_ms: a median inside the limit with a worst sample over it blocks.
    assert compare.judge_reset_done([1.0, 1.0, 1.0], [1.0, 1.7, 1.0], True)["verdict"] == compare.BLOCKED


def test_unpaired_worst_is_min_head_against_max_base():
    cost, worst = compare.throughput_costs([900, 1000, 1100], [900, 1000, 1100], paired=False)
    assert cost == pytest.approx(0.0) and worst == pytest.approx(1 - 900 / 1100)


def test_closeout_ceiling_against_the_baseline():
    baseline = side(throughput=scaled(1.4))  # the migration started 40% faster
    r = compare.compare_case(TRACK, side(), side(), True, baseline)
    assert r["verdict"] == compare.BLOCKED and "closeout ceiling" in r["why"]


def test_case_absent_in_base_is_said_not_crashed_and_absent_in_head_blocks():
    r = verdict(None, side())
    assert r["verdict"] == compare.PASS and "case absent in base" in r["why"]
    r = verdict({"status": "case absent in base: no task g1_motion_tracking", "samples": []}, side())
    assert "case absent in base" in r["why"]
    assert verdict(side(), None)["verdict"] == compare.BLOCKED


def test_a_base_that_ran_and_failed_blocks_instead_of_passing():
    r = verdict({"status": "failed in round 0: env failed: exit 1, collector failed: exit 1", "samples": []}, side())
    assert r["verdict"] == compare.BLOCKED and "nothing compared" in r["why"] and "exit 1" in r["why"]


def _record(path: Path, cases: dict, base: dict | None = None) -> Path:
    per_case = {name: {"head": s} | ({"base": base[name]} if base and name in base else {})
                for name, s in cases.items()}
    path.write_text(json.dumps({"benchmark": "unilab_bench.matrix", "cases": per_case}))
    return path


def test_compare_cli_exit_codes_on_files(tmp_path, capsys):
    base = _record(tmp_path / "base.json", {TRACK: side(), WALK: side()})
    good = _record(tmp_path / "good.json", {TRACK: side(), WALK: side()})
    slow = _record(tmp_path / "slow.json", {TRACK: side(throughput=scaled(0.7)), WALK: side()})
    synced = _record(tmp_path / "sync.json", {TRACK: side(), WALK: side(syncs=1.0)})
    assert compare.main([str(base), str(good)]) == 0
    assert compare.main([str(base), str(slow)]) == 2
    assert compare.main([str(base), str(synced), "--json", str(tmp_path / "out.json")]) == 2
    assert json.loads((tmp_path / "out.json").read_text())["verdict"] == compare.BLOCKED
    out = capsys.readouterr().out
    assert "| case | verdict | metric | detail |" in out and "new host sync" in out
    both = _record(tmp_path / "run.json", {TRACK: side(reset_done=(4.0,) * 3)}, base={TRACK: side()})
    assert compare.main([str(both)]) == 2  # one --base record: paired, +3 ms reset_done_ms
    assert compare.main([str(tmp_path / "missing.json"), str(good)]) == compare.EXIT_ERROR
    assert compare.main([str(good)]) == compare.EXIT_ERROR  # no base side
    assert compare.main([]) == compare.EXIT_ERROR


def test_compare_names_a_record_cut_short_and_its_rounds(tmp_path, capsys):
    both = _record(tmp_path / "run.json", {TRACK: side()}, base={TRACK: side()})
    assert compare.main([str(both)]) == 0
    assert "partial" not in capsys.readouterr().out
    record = json.loads(both.read_text()) | {"rounds_done": 2, "complete": False, "settings": {"rounds": 3}}
    both.write_text(json.dumps(record))
    assert compare.main([str(both), "--json", str(tmp_path / "out.json")]) == 0
    first_line = capsys.readouterr().out.splitlines()[0]
    assert f"partial record {both}: 2 of 3 rounds" in first_line
    assert json.loads((tmp_path / "out.json").read_text())["partial_records"] == [f"{both}: 2 of 3 rounds"]
    base = _record(tmp_path / "base.json", {TRACK: side()})
    assert compare.main([str(both), str(base)]) == 0  # a cut-short base record is named too
    assert f"partial record {both}: 2 of 3 rounds" in capsys.readouterr().out


def test_default_selection_and_filter():
    names = [c.name for c in matrix.select_cases(None, "cpu")]
    assert names == ["flashsac/g1_motion_tracking/mujoco", "flashsac/g1_walk_flat/mujoco", "fastsac/g1_walk_flat/mujoco"]
    assert len(matrix.select_cases(None, "cuda")) == 9
    assert all(c.smoke for c in matrix.CASES if c.backend == "genesis")
    assert [c.name for c in matrix.select_cases("*/g1_walk_flat/mjwarp", "cuda")] == [
        "flashsac/g1_walk_flat/mjwarp", "fastsac/g1_walk_flat/mjwarp"]
    with pytest.raises(ValueError, match="matches no case"):
        matrix.select_cases("nope", "cpu")


def test_each_gpu_case_learns_as_its_tasks_preset_trains_and_the_cpu_profile_with_the_small_learner():
    settings = matrix.Settings("cuda", 4096, 3, 5, 1, 0.1, 1, 10.0)
    cases = {c.name: c for c in matrix.CASES}

    def preset(name: str) -> str:
        command = matrix.collector_command(cases[name], settings, Path("c.json"))
        return command[command.index("--preset") + 1]

    assert preset("flashsac/g1_motion_tracking/mjwarp") == "gpu_track"
    assert preset("flashsac/g1_walk_flat/mjwarp") == "gpu_walk" and preset("fastsac/g1_walk_flat/mjwarp") == "gpu_walk"
    on_host = matrix.collector_command(cases[TRACK], settings, Path("c.json"))  # the CPU profile, whatever --device
    assert "--preset" not in on_host and on_host[on_host.index("--device") + 1] == "cpu"
    assert on_host[-len(matrix.CPU_LEARNER):] == list(matrix.CPU_LEARNER)


def test_case_metrics_reads_the_runners_records_by_name():
    env = {"env_steps_per_s": {"env_zero": {"median": 900.0}, "raw": {"median": 1200.0}},
           "ratio_to_raw_median": {"env_zero": 0.75}, "paired_ratio_to_raw": {"env_zero": {"median": 0.7}},
           "phases_ms_per_step": {"update_state_ms": 1.0, "reset_done_ms": 0.5, "reset_done_reset_call_ms": 0.2,
                                  "backend_step_ms": 3.0},
           "python_calls_per_env_step": 800.0, "backend_counters": {"redundant_physics_steps_per_env_step": 0.0},
           "dispatch_per_env_step": {"host_syncs_per_step": 0.0}, "host_syncs_per_env_step": None}
    col = {"env_steps_per_s_no_learning": {"median": 800.0}, "env_steps_per_s_with_learning": {"median": 100.0},
           "phase_ms_with_learning": {"replay_ms": 0.4, "learner_ms": 9.0, "policy_ms": 0.3},
           "dispatch_per_collector_step": {"host_syncs_per_collector_step": 5.0, "kernel_ops_per_collector_step": 258.0},
           "of_env_alone": {"no_learning": {"median": 0.76}},
           "of_env_alone_replaying_actions": {"with_learning_overlapped": {"median": 0.61}}}
    m = matrix_figures.case_metrics(env, col)
    assert m["kernel_ops_per_collector_step"] == 258.0 and m["policy_ms"] == 0.3
    assert m["collector_of_env_alone_no_learning"] == 0.76
    assert m["collector_of_env_alone_replaying_actions_with_learning_overlapped"] == 0.61
    assert m["collector_of_env_alone_with_learning"] is None  # a mode the record does not have
    assert m["env_steps_per_s_streamed"] == 900 and m["raw_physics_steps_per_s_streamed"] == 1200
    assert m["paired_single_step_ratio_drift_control"] == 0.7 and m["reset_done_ms"] == 0.5
    assert m["replay_ms"] == 0.4 and m["learner_ms"] == 9.0 and m["host_syncs_per_collector_step"] == 5.0
    assert m["redundant_physics_steps_in_reset"] == 0.0 and m["python_calls_per_env_step"] == 800
    assert matrix_figures.case_metrics(None, None)["reset_done_ms"] is None  # an older record lacks a figure


def test_driver_interleaves_abba_and_says_case_absent_in_base(tmp_path, monkeypatch):
    calls: list[tuple[str, str]] = []

    def probe(self):
        tasks = ["g1_walk_flat"] if self.label == "base" else ["g1_walk_flat", "g1_motion_tracking"]
        return {"env_step": True, "collector": "unilab_bench.cli", "tasks": tasks}

    def run_unit(tree, cmd, out, timeout_s):
        kind = "env" if "unilab_bench.env_step" in cmd else "collector"
        calls.append((tree.label, kind))
        record = {"env_steps_per_s": {"env_zero": {"median": 100.0}, "raw": {"median": 120.0}},
                  "phases_ms_per_step": {"reset_done_ms": 1.0}, "backend_diagnostics": {"physics_steps": 1}}
        if kind == "collector":
            record = {"env_steps_per_s_no_learning": {"median": 90.0}, "env_steps_per_s_with_learning": {"median": 9.0}}
        return {"status": "ok", "record": record, "wall_s": 0.0}

    monkeypatch.setattr(matrix.Tree, "probe", probe)
    monkeypatch.setattr(matrix_units, "run_unit", run_unit)
    settings = matrix.Settings("cpu", 4, 3, 5, 1, 0.1, 1, 10.0)
    trees = [matrix.Tree("base", tmp_path, "b"), matrix.Tree("head", tmp_path, "h")]
    cases = matrix.select_cases(None, "cpu")
    results = matrix.run_matrix(cases, settings, trees, tmp_path, log=lambda *_: None)
    track = results["flashsac/g1_motion_tracking/mujoco"]
    assert track["base"]["status"] == "case absent in base: no task g1_motion_tracking"
    assert len(track["head"]["samples"]) == 3 and track["head"]["stats"]["reset_done_ms"]["median"] == 1.0
    walk = results["fastsac/g1_walk_flat/mujoco"]
    assert len(walk["base"]["samples"]) == 3 and len(walk["head"]["samples"]) == 3
    # The env process of one task/backend is shared by both algorithms: per round and tree,
    # 2 env processes (tracking only on head) and 3 collector processes.
    assert calls.count(("head", "env")) == 6 and calls.count(("base", "env")) == 3
    assert calls.count(("head", "collector")) == 9 and calls.count(("base", "collector")) == 6
    # ABBA: round 0 runs base first, round 1 head first.
    firsts = [label for label, kind in calls if kind == "collector"]
    assert firsts[1:3] == ["base", "head"]  # round 0, walk flashsac (after tracking on head alone)
    result = compare.compare_records({n: t["base"] for n, t in results.items()},
                                     {n: t["head"] for n, t in results.items()}, paired=True)
    assert result["exit_code"] == 0
    assert "case absent in base" in next(r for r in result["cases"] if "tracking" in r["case"])["why"]


def test_machine_record_names_what_the_numbers_depend_on():
    m = machine_info.machine()
    assert {"cpu_model", "scaling_governor", "governor_controllable", "logical_cpus", "gpus", "numa_nodes"} <= set(m)
    assert m["logical_cpus"] >= 1


@pytest.mark.slow
def test_matrix_end_to_end_on_mujoco_writes_a_record(tmp_path):
    out = tmp_path / "m.json"
    code = matrix.main(["--cases", "fastsac/g1_walk_flat/mujoco", "--num-envs", "2", "--env-steps", "3",
                        "--env-warmup", "1", "--collector-seconds", "0.2", "--collector-samples", "1", "--out", str(out)])
    record = json.loads(out.read_text())
    head = record["cases"]["fastsac/g1_walk_flat/mujoco"]["head"]
    assert code == 0 and head["status"] == "ok" and len(head["samples"]) == 3
    assert head["stats"]["env_steps_per_s_streamed"]["median"] > 0 and "physics_steps" in head["backend_diagnostics"]
    assert record["machine"]["cpu_model"] and record["versions"]["torch"]


def test_the_tracking_env_process_also_times_its_reference_loop_where_the_tree_has_one(tmp_path):
    settings = matrix.Settings("cpu", 4, 3, 5, 1, 0.1, 1, 10.0)
    cases = {c.task: c for c in matrix.select_cases(None, "cpu")}
    track, walk = cases["g1_motion_tracking"], cases["g1_walk_flat"]
    assert matrix.env_command(track, settings, tmp_path / "a.json", reference=True)[-2:] == ["--reference", "tracking"]
    assert "--reference" not in matrix.env_command(track, settings, tmp_path / "a.json", reference=False)
    assert "--reference" not in matrix.env_command(walk, settings, tmp_path / "a.json", reference=True)
    env = {"env_steps_per_s": {"env_zero": {"median": 900.0}, "raw": {"median": 1200.0}},
           "reference": {"steps_per_s": {"median": 950.0}, "dispatch_per_step": {"kernel_ops_per_step": 301.0}},
           "env_to_reference_ratio": 900.0 / 950.0}
    m = matrix_figures.case_metrics(env, None)
    assert m["reference_steps_per_s_streamed"] == 950.0 and m["reference_kernel_ops_per_step"] == 301.0
    assert m["env_to_reference_ratio_streamed"] == pytest.approx(0.947, abs=1e-3)


def test_the_probe_finds_each_trees_name_for_the_comparison_flag(tmp_path):
    head = matrix.Tree("head", Path(__file__).resolve().parents[2], "HEAD").probe()
    assert head["compare_flag"] == "--compare-task"
    old = tmp_path / "old"
    bench = old / "unilab" / "src" / "unilab_bench"
    bench.mkdir(parents=True)
    (bench / "__init__.py").write_text("")
    (bench / "env_step.py").write_text('p.add_argument("--unfused-task", default="g1_walk_flat_unfused")\n')
    assert matrix.Tree("base", old, "OLD").probe()["compare_flag"] == "--unfused-task"
    walk = matrix.Case("fastsac", "g1_walk_flat", "mujoco")
    settings = matrix.Settings("cpu", 2, 1, 2, 1, 0.1, 1, 60.0)
    cmd = matrix.env_command(walk, settings, tmp_path / "a.json", compare_flag="--unfused-task")
    assert cmd[cmd.index("--unfused-task") + 1] == ""


@pytest.fixture
def fake_units(monkeypatch):
    """Every tree has both runners; each unit writes a small record (with its command, as the
    runners do) and is logged as (tree, kind, file name)."""
    calls: list[tuple[str, str, str]] = []

    def run_unit(tree, cmd, out, timeout_s):
        kind = "env" if "unilab_bench.env_step" in cmd else "collector"
        calls.append((tree.label, kind, out.name))
        record = {"env_steps_per_s": {"env_zero": {"median": 100.0}, "raw": {"median": 120.0}},
                  "phases_ms_per_step": {"reset_done_ms": 1.0}}
        if kind == "collector":
            record = {"env_steps_per_s_no_learning": {"median": 90.0}}
        record["command"] = " ".join([f"/tree/{kind}.py", *cmd[3:]])
        record["git_commit"] = tree.commit + ("-dirty" if kind == "collector" else "")
        out.write_text(json.dumps(record))
        return {"status": "ok", "record": record, "wall_s": 0.0}

    monkeypatch.setattr(matrix.Tree, "probe", lambda self: {"env_step": True, "collector": "unilab_bench.cli", "tasks": None})
    monkeypatch.setattr(matrix_units, "run_unit", run_unit)
    return calls


def test_smoke_cases_run_in_the_first_round_only(tmp_path, fake_units):
    cases = matrix.select_cases("*/mjwarp,*/genesis", "cuda")
    settings = matrix.Settings("cuda", 4, 3, 5, 1, 0.1, 1, 10.0)
    results = matrix.run_matrix(cases, settings, [matrix.Tree("head", tmp_path, "h")], tmp_path, log=lambda *_: None)
    assert len(results["fastsac/g1_walk_flat/genesis"]["head"]["samples"]) == 1
    assert len(results["fastsac/g1_walk_flat/mjwarp"]["head"]["samples"]) == 3
    assert sum(1 for _, kind, name in fake_units if kind == "collector" and "genesis" in name) == 3


def test_a_run_started_again_with_the_same_units_reuses_what_it_finished(tmp_path, fake_units):
    cases = matrix.select_cases("fastsac/g1_walk_flat/mujoco", "cpu")
    settings = matrix.Settings("cpu", 4, 3, 5, 1, 0.1, 1, 10.0)
    tree = matrix.Tree("head", tmp_path, "h")
    rounds_seen: list[int] = []
    matrix.run_matrix(cases, settings, [tree], tmp_path, log=lambda *_: None,
                      on_round=lambda results, done: rounds_seen.append(done))
    assert rounds_seen == [1, 2, 3] and len(fake_units) == 6
    (tmp_path / "head-r2-collector-fastsac-g1_walk_flat-mujoco.json").unlink()  # as if cut short there
    again = matrix.run_matrix(cases, settings, [tree], tmp_path, log=lambda *_: None)
    assert [name for _, _, name in fake_units[6:]] == ["head-r2-collector-fastsac-g1_walk_flat-mujoco.json"]
    units = again["fastsac/g1_walk_flat/mujoco"]["head"]["units"]
    assert [u["reused"] for u in units] == [True] * 5 + [False]


def test_units_made_with_other_settings_are_refused_not_reused(tmp_path, fake_units):
    cases = matrix.select_cases("fastsac/g1_walk_flat/mujoco", "cpu")
    tree = matrix.Tree("head", tmp_path, "h")
    matrix.run_matrix(cases, matrix.Settings("cpu", 4, 3, 5, 1, 0.1, 1, 10.0), [tree], tmp_path, log=lambda *_: None)
    with pytest.raises(ValueError, match="--units: head-r0-env-g1_walk_flat-mujoco.json was made by another command"):
        matrix.run_matrix(cases, matrix.Settings("cpu", 8, 3, 5, 1, 0.1, 1, 10.0), [tree], tmp_path,
                          log=lambda *_: None)  # 8 envs, not 4
    assert len(fake_units) == 6  # nothing ran for the refused run


def test_units_measured_at_another_commit_are_refused_not_reused(tmp_path, fake_units):
    cases = matrix.select_cases("fastsac/g1_walk_flat/mujoco", "cpu")
    settings = matrix.Settings("cpu", 4, 3, 5, 1, 0.1, 1, 10.0)
    matrix.run_matrix(cases, settings, [matrix.Tree("base", tmp_path, "a1b2")], tmp_path, log=lambda *_: None)
    # The same commit with uncommitted changes marked resumes; another commit does not.
    again = matrix.run_matrix(cases, settings, [matrix.Tree("base", tmp_path, "a1b2+uncommitted")], tmp_path,
                              log=lambda *_: None)
    assert all(u["reused"] for u in again["fastsac/g1_walk_flat/mujoco"]["base"]["units"])
    with pytest.raises(ValueError, match="--units: base-r0-env-g1_walk_flat-mujoco.json was measured at commit a1b2"):
        matrix.run_matrix(cases, settings, [matrix.Tree("base", tmp_path, "c3d4")], tmp_path, log=lambda *_: None)
    assert len(fake_units) == 6  # nothing ran again


def test_units_measured_on_another_machine_are_refused(tmp_path):
    units = tmp_path / "units"
    assert matrix_units.prepare_units(units, tmp_path) == units and (units / "machine.json").exists()
    assert matrix_units.prepare_units(units, tmp_path) == units  # the same machine resumes
    (units / "machine.json").write_text(json.dumps({"hostname": "elsewhere", "gpus": ["0, NVIDIA H200"]}))
    with pytest.raises(ValueError, match="--units .*elsewhere"):
        matrix_units.prepare_units(units, tmp_path)


def test_units_from_a_host_with_another_cpu_but_the_same_name_and_gpus_are_refused(tmp_path, monkeypatch):
    # One cloud's hosts can share a hostname and a GPU model; lscpu still tells their CPUs apart.
    def host(model: int):
        lscpu = f"Model name: Intel(R) Xeon(R) Processor\nCPU family: 6\nModel: {model}\nStepping: 2\n"
        return lambda: {"gpus": ["0, NVIDIA H100 80GB HBM3"], "lscpu": lscpu}

    units = tmp_path / "units"
    monkeypatch.setattr(matrix_units, "machine", host(143))
    matrix_units.prepare_units(units, tmp_path)
    assert matrix_units.prepare_units(units, tmp_path) == units
    monkeypatch.setattr(matrix_units, "machine", host(207))
    with pytest.raises(ValueError, match="--units .*6/143/2.*6/207/2"):
        matrix_units.prepare_units(units, tmp_path)


def test_a_run_cut_short_leaves_a_record_of_the_rounds_it_finished(tmp_path, monkeypatch):
    def cut_short(cases, settings, trees, units, on_round=None):
        results = {c.name: {"head": {"status": "ok", "smoke": False, "samples": [{}], "units": [], "stats": {}}}
                   for c in cases}
        on_round(results, 1)
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix, "run_matrix", cut_short)
    out = tmp_path / "m.json"
    with pytest.raises(KeyboardInterrupt):
        matrix.main(["--cases", "fastsac/g1_walk_flat/mujoco", "--out", str(out)])
    record = json.loads(out.read_text())
    assert record["rounds_done"] == 1 and record["complete"] is False


def test_a_tree_without_git_runs_with_its_commit_recorded_as_unknown(monkeypatch):
    def no_git(*args, **kwargs):
        raise subprocess.CalledProcessError(128, ["git", *args])

    monkeypatch.setattr(matrix_trees, "git", no_git)
    assert matrix_trees.working_tree_state() == ([], matrix_trees.NOT_A_CHECKOUT)


def test_gap_rows_pass_through_to_the_env_process_and_name_the_runtimes_own_cost(tmp_path):
    walk = matrix.Case("fastsac", "g1_walk_flat", "mujoco")
    plain = matrix.Settings("cpu", 2, 3, 2, 1, 0.1, 1, 60.0)
    with_gaps = matrix.Settings("cpu", 2, 3, 2, 1, 0.1, 1, 60.0, gap_rows=True)
    assert "--gap-rows" not in matrix.env_command(walk, plain, tmp_path / "a.json")
    assert "--gap-rows" in matrix.env_command(walk, with_gaps, tmp_path / "a.json")
    env = {"ratio_to_raw_median": {"env_zero": 0.8, "env_vs_raw_replaying_env_writes": 0.97}}
    assert matrix_figures.case_metrics(env, None)["env_to_replay_ratio_streamed"] == 0.97


def test_a_unit_keeps_its_own_wall_time_and_a_reused_unit_reports_it(tmp_path):
    import sys

    out = tmp_path / "unit.json"
    writer = "import json, sys, time; time.sleep(0.2); open(sys.argv[1], 'w').write(json.dumps({'command': 'x ' + sys.argv[1]}))"
    cmd = [sys.executable, "-c", writer, str(out)]
    tree = matrix.Tree("head", tmp_path, "h")
    ran = matrix_units.run_unit(tree, cmd, out, timeout_s=60.0)
    kept = json.loads(out.read_text())["_wall_s"]
    assert ran["status"] == "ok" and kept == ran["wall_s"] >= 0.2
    reused = matrix_units.reuse_or_run(tree, cmd, out, timeout_s=60.0)
    assert reused["reused"] and reused["wall_s"] == kept


def test_a_copied_base_tree_runs_as_the_base_and_is_named_in_the_record(tmp_path, monkeypatch):
    copy = tmp_path / "base-copy"
    for folder in matrix_trees.SOURCE_DIRS:
        (copy / folder).mkdir(parents=True)
    (copy / "workspace.toml").write_text("")
    seen = {}

    def run_matrix(cases, settings, trees, units, on_round=None):
        seen["trees"] = trees
        sides = {t.label: {"status": "ok", "smoke": False, "samples": [{}] * 3, "units": [], "stats": {}}
                 for t in trees}
        return {c.name: sides for c in cases}

    monkeypatch.setattr(matrix, "run_matrix", run_matrix)
    out = tmp_path / "m.json"
    matrix.main(["--cases", "fastsac/g1_walk_flat/mujoco", "--base-tree", str(copy), "--out", str(out)])
    base, head = seen["trees"]
    assert (base.label, base.root, base.commit) == ("base", copy.resolve(), matrix_trees.NOT_A_CHECKOUT)
    assert head.label == "head" and head.root == matrix_trees.ROOT
    record = json.loads(out.read_text())
    assert record["base"] == {"rev": None, "tree": str(copy), "commit": matrix_trees.NOT_A_CHECKOUT}
    assert "comparison" in record  # paired like --base


def test_a_base_tree_without_the_sources_or_beside_base_is_refused_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(matrix, "run_matrix", lambda *a, **k: pytest.fail("nothing may run"))
    (tmp_path / "unilab" / "src").mkdir(parents=True)
    with pytest.raises(SystemExit):
        matrix.main(["--base-tree", str(tmp_path)])
    assert "--base-tree" in (err := capsys.readouterr().err) and "unisim-core/src, unilab_rl/src, workspace.toml" in err
    # The source folders without the workspace file the adapters read at run time: refused too.
    for folder in matrix_trees.SOURCE_DIRS:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
    with pytest.raises(SystemExit):
        matrix.main(["--base-tree", str(tmp_path)])
    assert (err := capsys.readouterr().err).count("missing workspace.toml") == 1 and "unilab/src" not in err.split("missing")[1]
    with pytest.raises(SystemExit):
        matrix.main(["--base", "HEAD", "--base-tree", str(tmp_path)])
    assert "give one base" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--num-envs", "0"], ["--env-steps", "0"], ["--env-warmup", "-1"],
                                  ["--collector-seconds", "0"], ["--collector-samples", "0"], ["--timeout", "nan"]])
def test_bad_counts_are_refused_by_the_parser_naming_the_flag(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        matrix.main(["--device", "cpu", *argv])
    assert exit_info.value.code == 2
    assert f"argument {argv[0]}:" in capsys.readouterr().err


def test_a_zero_warmup_is_kept_not_taken_for_unset(monkeypatch):
    made = {}

    class Stop(Exception):
        pass

    def record_settings(**settings):
        made.update(settings)
        raise Stop

    monkeypatch.setattr(matrix, "Settings", record_settings)
    with pytest.raises(Stop):
        matrix.main(["--device", "cpu", "--env-warmup", "0"])
    assert made["env_warmup"] == 0 and made["num_envs"] == 64 and made["env_steps"] == 20


def test_a_copied_tree_records_the_commit_its_commit_file_names(tmp_path, monkeypatch):
    copy = tmp_path / "base-copy"
    for folder in matrix_trees.SOURCE_DIRS:
        (copy / folder).mkdir(parents=True)
    (copy / "workspace.toml").write_text("")
    (copy / "COMMIT").write_text("89bd1f8\n")
    assert matrix_trees.copied_tree("base", copy).commit == "89bd1f8 (copied tree)"
    (copy / "COMMIT").write_text("")
    assert matrix_trees.copied_tree("base", copy).commit == matrix_trees.NOT_A_CHECKOUT

    def no_git(*args, **kwargs):
        raise subprocess.CalledProcessError(128, ["git", *args])

    monkeypatch.setattr(matrix_trees, "git", no_git)
    monkeypatch.setattr(matrix_trees, "ROOT", copy)
    (copy / "COMMIT").write_text("cdd6a62")
    assert matrix_trees.working_tree_state() == ([], "cdd6a62 (copied tree)")
