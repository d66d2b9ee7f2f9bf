"""The results store on small fixtures: append and read, records made from what the tools write,
the generated tables, the stale check and the hand-typed figures without a record."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from unilab_bench import compare, env_step
from unilab_bench.results import claims, records, render, store
from unilab_bench.results import cli as results_cli

H200 = "0, NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz, 700.00 W, Enabled"
LSCPU = "CPU family:  6\nModel:  207\nStepping:  2\n"


def _stats(median, spread=0.01):
    return {"min": median * (1 - spread), "median": median, "max": median * (1 + spread)}


def env_full(task="g1_walk_flat", env=421400.0, raw=598800.0, replay=445600.0, graphed=427700.0):
    """What ``unilab-bench env --gap-rows --compare-override cuda_graph=true`` writes, cut down."""
    return {"benchmark": "unilab_bench.env_step", "task": task, "backend": "mjwarp", "num_envs": 4096,
            "device": "cuda:0", "gpu": "NVIDIA H200", "overrides": [], "comparison_task": task,
            "comparison_overrides": ["cuda_graph=true"], "torch_threads": 16,
            "env_steps_per_s": {"raw": _stats(raw), "env_zero": _stats(env), "raw_replaying_env_writes": _stats(replay),
                                "env_compare": _stats(graphed), "env_random": _stats(env * 0.9)},
            "ratio_to_raw_median": {"env_zero": env / raw, "env_vs_raw_replaying_env_writes": env / replay,
                                    "env_compare": graphed / raw},
            "dispatch_per_env_step": {"kernel_ops_per_step": 166.0, "host_syncs_per_step": 0.0},
            "git_commit": "b6bd251", "command": "/x/bench/src/unilab_bench/env_step.py --backend mjwarp",
            "time": "2026-12-05T04:01:32+0000", "machine": {"gpus": [H200], "cpu_model": "Xeon", "lscpu": LSCPU,
                                                            "logical_cpus": 16}}


def collector_full():
    return {"benchmark": "collector", "task": "g1_walk_flat", "backend": "mjwarp", "algo": "flashsac",
            "num_envs": 4096, "device": "cuda:0", "device_name": "NVIDIA H100 80GB HBM3",
            "command": "unilab-bench collector --preset gpu_walk --algo flashsac env.cuda_graph=true",
            "algo_config": {"updates_per_step": 2.0},
            "env_steps_per_s_no_learning": _stats(409000.0), "env_steps_per_s_with_learning": _stats(249000.0),
            "env_steps_per_s_with_learning_overlapped": _stats(285629.4), "env_steps_per_s_env_alone": _stats(409572.3),
            "of_env_alone": {"no_learning": _stats(0.9988), "with_learning": _stats(0.6074),
                             "with_learning_overlapped": _stats(0.69616557)},
            "of_env_alone_replaying_actions": {"with_learning_overlapped": _stats(0.676)},
            "dispatch_per_collector_step": {"kernel_ops_per_collector_step": 300.0,
                                            "host_syncs_per_collector_step": 0.0},
            "git_commit": "unknown", "machine": None}


def write_run(folder: Path, seed=0, passed_at=(False, True), latest=None, wall=(60.0, 90.0)):
    """A finished ``unilab-train --eval`` run: summary.json, run.json, eval/over-time.json."""
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({
        "task": "g1_walk_flat", "backend": "mjwarp", "algo": "fastsac", "num_envs": 4096, "env_steps": 22_800_000,
        "updates": 44_000, "wall_s": wall[-1], "startup_s": 4.9, "imports_s": 1.6, "writes_bytecode": True,
        "median_env_steps_per_s_learning": 269_400.0, "machine": {"gpus": [H200], "cpu_model": "Xeon"}}))
    (folder / "run.json").write_text(json.dumps({
        "preset": "gpu_walk", "seed": seed, "budget": {"minutes": 1.5, "steps": None}, "git_commit": "0967d3a",
        "command": ["/venv/bin/unilab-train", "--preset", "gpu_walk", "--seed", str(seed), "--eval",
                    "runner.snapshot_at_s=60", "eval.envs_per_command=8"]}))

    def over_time(passes, actor):
        rows = [{"checkpoint": f"c{i}", "actor": actor, "trained_wall_s": w, "trained_env_steps": int(w * 250_000),
                 "mjwarp": {"passed": p, "cases_passed": 17 if p else 15, "cases": 17}}
                for i, (w, p) in enumerate(zip(wall, passes, strict=True))]
        return {"evaluated_on": "g1_walk_flat_play", "checkpoints": rows}

    (folder / "eval").mkdir()
    (folder / "eval" / "over-time.json").write_text(json.dumps(over_time(passed_at, "averaged")))
    if latest is not None:
        (folder / "eval-latest-actor").mkdir()
        (folder / "eval-latest-actor" / "over-time.json").write_text(json.dumps(over_time(latest, "latest")))
    return folder


def env_store_record(**kw):
    return records.env_record(env_full(**kw), command="unilab-bench env --backend mjwarp")


# ---- the store ----------------------------------------------------------------------------------
def test_append_writes_one_line_in_field_order_and_read_gives_it_back(tmp_path):
    path = tmp_path / "results" / "records.jsonl"
    record = store.append(path, env_store_record())
    lines = path.read_text().splitlines()
    assert len(lines) == 1 and list(json.loads(lines[0])) == list(store.FIELDS)
    assert store.read(path) == [record]
    assert record["id"].startswith("env-2026-12-05-g1_walk_flat-mjwarp-4096-h200-")


def test_the_same_measurement_is_not_appended_twice(tmp_path):
    path = tmp_path / "records.jsonl"
    store.append(path, env_store_record())
    with pytest.raises(ValueError, match="already holds"):
        store.append(path, env_store_record())
    store.append(path, env_store_record(env=400000.0))  # another measurement: another id
    assert len(store.read(path)) == 2


@pytest.mark.parametrize(("change", "message"), [
    ({"kind": "guess"}, "kind"), ({"date": "05.12.2026"}, "date"), ({"caches": "lukewarm"}, "caches"),
    ({"figures": {}}, "no figures"), ({"extra": 1}, "unknown"),
])
def test_a_malformed_record_is_refused(change, message):
    record = env_store_record() | change
    with pytest.raises(ValueError, match=message):
        store.check_record(record)


def test_a_damaged_line_is_named_by_its_number(tmp_path):
    path = tmp_path / "records.jsonl"
    store.append(path, env_store_record())
    with path.open("a") as out:
        out.write("{not json\n")
    with pytest.raises(ValueError, match=r"records.jsonl:2"):
        store.read(path)


# ---- records from what the tools write ----------------------------------------------------------
def test_an_env_record_keeps_the_benchmark_figures_as_written():
    r = env_store_record()
    f = r["figures"]
    assert f["env_steps_per_s"] == _stats(421400.0) and f["raw_steps_per_s"]["median"] == 598800.0
    assert f["ratio_to_raw"] == 421400.0 / 598800.0 and f["ratio_to_replay"] == 421400.0 / 445600.0
    assert f["compare_to_replay"] == 427700.0 / 445600.0 and f["kernel_ops_per_env_step"] == 166.0
    assert r["gpu"] == "NVIDIA H200" and r["cpu"] == "Xeon (6/207/2) x16" and r["commit"] == "b6bd251"
    assert r["subject"]["compare_overrides"] == ["cuda_graph=true"] and "torch_threads" not in r["subject"]


def test_a_collector_record_takes_its_preset_and_overrides_from_the_command():
    r = records.collector_record(collector_full(), date="2026-12-06")
    assert r["subject"]["preset"] == "gpu_walk" and r["subject"]["overrides"] == ["env.cuda_graph=true"]
    assert r["subject"]["updates_per_step"] == 2.0 and r["gpu"] == "NVIDIA H100 80GB HBM3" and r["commit"] is None
    assert r["figures"]["of_env_alone"]["with_learning_overlapped"] == 0.69616557


def test_a_run_folder_gives_its_time_to_a_pass_and_both_actors(tmp_path):
    run = write_run(tmp_path / "walk", latest=(False, False))
    [r] = records.run_records(run, caches="warm")
    judged, latest = r["figures"]["eval"], r["figures"]["eval_latest_actor"]
    assert judged["passed"] and judged["time_to_pass_s"] == 90.0 and judged["over_time"] == [
        [60.0, 15_000_000, 15], [90.0, 22_500_000, 17]]
    assert not latest["passed"] and "time_to_pass_s" not in latest and latest["cases_passed"] == 15
    s = r["subject"]
    assert s["seed"] == 0 and s["minutes"] == 1.5 and s["overrides"] == ["runner.snapshot_at_s=60"]
    assert s["entry"] == "gpu_walk/fastsac"  # which snapshots a run kept is not what it trained as
    assert r["command"].startswith("unilab-train --preset gpu_walk") and r["caches"] == "warm"


def test_a_seeds_folder_gives_one_record_per_seed(tmp_path):
    out = tmp_path / "seeds"
    for seed in (0, 1, 2):
        write_run(out / f"seed-{seed}", seed=seed, passed_at=(False, seed != 1))
    (out / "seeds.json").write_text("{}")
    made = records.run_records(out)
    assert [r["subject"]["seed"] for r in made] == [0, 1, 2]
    assert [r["figures"]["eval"]["passed"] for r in made] == [True, False, True]


def test_a_folder_without_a_summary_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no summary.json"):
        records.run_records(tmp_path)


# ---- the generated tables -----------------------------------------------------------------------
def three_seeds(tmp_path):
    out = tmp_path / "runs"
    for seed in (0, 1, 2):
        write_run(out / f"seed-{seed}", seed=seed, passed_at=(False, seed != 1))
    (out / "seeds.json").write_text("{}")
    return [*records.run_records(out, caches="warm", date="2026-12-04"), env_store_record()]


def test_the_tables_count_seeds_and_print_rates_and_ratios(tmp_path):
    kept = three_seeds(tmp_path)
    page, table = render.render_results(kept), render.render_readme_table(kept)
    assert "2 of 3 seeds (per seed 17, 15, 17 of 17)" in page and "| 0-2 |" in page
    assert "4.9 s (+ 1.60 s of imports)" in page
    row = next(line for line in table.splitlines() if "walking" in line)
    assert "FastSAC `gpu_walk`" in row and "| H200 |" in row and "90 s: 2 of 3 seeds" in row
    env = next(line for line in table.splitlines() if "env step" in line)
    assert "421k env-steps/s, 0.946x raw physics doing the same work, 0.704x" in env and "428k, 0.960x" in env


def make_checkout(root: Path, kept: list[dict]) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("# X\n\nHand-typed: a walking G1 after 90 s.\n\n"
                                    "<!-- results:begin readme -->\n<!-- results:end readme -->\n")
    (root / "docs" / "training.md").write_text("# Training\n\nNo figures here.\n")
    path = root / "results" / "records.jsonl"
    for record in kept:
        store.append(path, record)
    return path


def test_check_passes_after_render_and_fails_on_a_stale_section(tmp_path, capsys):
    root = tmp_path / "checkout"
    path = make_checkout(root, three_seeds(tmp_path))
    argv = ["--store", str(path), "--root", str(root)]
    assert results_cli.main(["check", *argv]) == 1  # nothing rendered yet
    assert "docs/results.md: stale" in capsys.readouterr().err
    assert results_cli.main(["render", *argv]) == 0
    assert "2 of 3 seeds" in (root / "README.md").read_text()
    assert results_cli.main(["check", *argv]) == 0
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("2 of 3 seeds", "3 of 3 seeds"))  # a table edited by hand
    assert results_cli.main(["check", *argv]) == 1
    assert "README.md: stale" in capsys.readouterr().err
    assert results_cli.main(["render", *argv]) == 0 and results_cli.main(["check", *argv]) == 0


def test_a_new_record_makes_the_generated_docs_stale(tmp_path):
    root = tmp_path / "checkout"
    path = make_checkout(root, three_seeds(tmp_path))
    render.write(root, store.read(path))
    store.append(path, env_store_record(env=430000.0))
    assert render.stale(root, store.read(path)) == [root / "docs/results.md", root / "README.md"]


def test_a_section_without_both_markers_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="expected one"):
        render.replace_section("no markers", "readme", "x")


# ---- hand-typed figures -------------------------------------------------------------------------
def test_a_hand_typed_figure_needs_a_record_and_generated_ones_are_not_scanned(tmp_path):
    root = tmp_path / "checkout"
    kept = three_seeds(tmp_path)
    make_checkout(root, kept)
    render.write(root, kept)
    doc = root / "docs" / "training.md"
    doc.write_text("The env steps at 421k env-steps/s, 0.946x of raw physics; FastSAC walks after 90 s;\n"
                   "2 of 3 seeds passed.\n")
    assert claims.unbacked(root, kept) == []
    doc.write_text("About 999k env-steps/s, 0.950x raw; 7 of 8 seeds; tracking passes after 45 s.\n")
    problems = claims.unbacked(root, kept)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "env-steps/s '999k' is in no record of the store", "ratio '0.950x' is in no record of the store",
        "count '7 of 8 seeds' is in no record of the store", "time to a result '45 s' is in no record of the store"]
    assert problems[0].startswith("docs/training.md:1:")
    assert results_cli.check(root, kept) == 1


def test_figures_inside_a_generated_section_are_not_claims():
    text = "a\n<!-- results:begin readme -->\n999k 0.123x\n<!-- results:end readme -->\nb 0.5x\n"
    assert claims.figures_in(claims.outside_sections(text)) == []
    assert [f for _, f, _ in claims.figures_in(text)] == ["999k", "0.123x"]


# ---- --record on the tools ----------------------------------------------------------------------
def test_add_run_appends_to_the_store_it_is_given(tmp_path, capsys):
    run = write_run(tmp_path / "walk")
    path = tmp_path / "store.jsonl"
    assert results_cli.main(["add-run", str(run), "--record", str(path), "--caches", "cold"]) == 0
    [r] = store.read(path)
    assert r["kind"] == "training" and r["caches"] == "cold" and r["id"] in capsys.readouterr().out
    assert results_cli.main(["add-run", str(run), "--record", str(path)]) == 0  # another caches value: a new id
    assert results_cli.main(["add-run", str(run), "--record", str(path)]) == 2  # the same record again


def test_add_turns_a_benchmark_json_into_a_record(tmp_path):
    (tmp_path / "env.json").write_text(json.dumps(env_full()))
    (tmp_path / "col.json").write_text(json.dumps(collector_full()))
    path = tmp_path / "store.jsonl"
    assert results_cli.main(["add", str(tmp_path / "env.json"), str(tmp_path / "col.json"), "--record", str(path)]) == 0
    assert [r["kind"] for r in store.read(path)] == ["env", "collector"]


def test_unilab_bench_env_record_appends_the_compact_record(tmp_path, monkeypatch):
    monkeypatch.setattr(env_step, "run", lambda args: env_full())
    monkeypatch.setattr(env_step, "_print", lambda record: None)
    path = tmp_path / "records.jsonl"
    argv = ["--backend", "mujoco", "--num-envs", "4", "--record", str(path)]
    monkeypatch.setattr(sys, "argv", ["/venv/bin/unilab-bench", "env", *argv])
    env_step.main(argv)
    [r] = store.read(path)
    assert r["kind"] == "env" and r["figures"]["ratio_to_raw"] == 421400.0 / 598800.0
    assert r["command"] == f"unilab-bench env --backend mujoco --num-envs 4 --record {path}"


def test_unilab_bench_env_refuses_a_damaged_store_before_it_measures(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    path.write_text("{not json\n")
    monkeypatch.setattr(env_step, "run", lambda args: pytest.fail("measured before checking --record"))
    with pytest.raises(SystemExit) as refused:
        env_step.main(["--backend", "mujoco", "--num-envs", "4", "--record", str(path)])
    assert refused.value.code == 2


def test_unilab_bench_compare_records_its_verdicts(tmp_path):
    side = {"status": "ok", "smoke": False, "samples": [
        {"env_steps_per_s_streamed": 1000.0, "reset_done_ms": 1.0, "host_syncs_per_env_step": 0.0,
         "redundant_physics_steps_in_reset": 0.0} for _ in range(3)]}
    settings = {"device": "cuda", "num_envs": 4096, "env_steps": 200, "env_warmup": 50, "collector_seconds": 2.0,
                "rounds": 3}
    paths = []
    for name in ("base", "head"):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps({"benchmark": "unilab_bench.matrix", "settings": settings,
                                         "machine": {"gpus": [H200], "cpu_model": "Xeon"}, "time": "2026-12-06T01:00",
                                         "cases": {"flashsac/g1_walk_flat/mjwarp": {"head": side}}}))
    path = tmp_path / "records.jsonl"
    assert compare.main([*map(str, paths), "--record", str(path)]) == 0
    [r] = store.read(path)
    assert r["kind"] == "compare" and r["figures"]["verdict"] == "pass" and r["gpu"] == "NVIDIA H200"
    assert r["figures"]["cases"]["flashsac/g1_walk_flat/mjwarp"]["verdict"] == "pass"

