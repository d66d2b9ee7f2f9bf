"""Classify a head matrix record against a base record by the staged performance budget.

    unilab-bench compare BASE.json HEAD.json [--baseline ORIGINAL.json] [--json OUT]
    unilab-bench compare RUN.json             # a ``matrix --base`` record (both sides, paired)
    unilab-bench compare BASE.json HEAD.json --counts-only   # records not measured alike

The budget (docs/benchmarks.md):

- throughput (streamed env steps/s; collector steps/s without learning, learning after each
  step, and learning beside collection, as the presets that overlap it train) may cost at most
  the per-change allowance: 20% on motion tracking, 10% on walking and any other task;
- the closeout ceiling is 25% against the baseline (``--baseline``, else the base);
- ``reset_done_ms`` may not grow by more than 50% or 2 ms, whichever is smaller;
- no new per-step host sync (the selected-reset path runs inside every step, masked, so a
  sync it gains is a per-step sync) and no new redundant physics step in a reset.

Noise: a cost within the samples' own spread is "inside noise"; it passes only if its upper
estimate (the worst of the paired samples) is inside the allowance. Verdicts per case:
``pass``, ``allowance used`` (names the optimization follow-up it opens: bring the metric
back to at least the base) and ``blocked``. A figure an older base lacks is not compared; one
the base has and the head lacks blocks, since its gate was never applied. Exit code: 0 all
pass, 1 some allowance used, 2 something blocked, 3 the records could not be read or compared.

Two records not measured alike (another GPU model; another CPU by name or, where a virtual
machine names every CPU alike, by lscpu's family, model and stepping; another CPU count,
device, ``num_envs``, or timing windows: ``env_steps``, ``env_warmup``, ``collector_seconds``)
are refused: their throughput and times would say as much about the measurement as about the
code.
``--counts-only`` judges their per-step counts alone (host syncs, redundant physics). Kernel ops
and Python calls per step are reported beside the verdicts, base and head, and not judged: a
change may add ops on purpose.

A record cut short (``complete: false``: a lease ended, the process was killed) is compared on
the rounds it finished, and the table's first line names it and its rounds, so a verdict on two
rounds is not read as one on all of them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from unilab_rl.machine_info import cpu_identity

from unilab_bench.results.cli import record_to
from unilab_bench.results.records import command_line, compare_record

PASS, ALLOWANCE, BLOCKED = "pass", "allowance used", "blocked"
# A base that lacks the case (its task or runner) leaves nothing to compare, and that is no fault.
ABSENT_IN_BASE = "case absent in base"
EXIT = {PASS: 0, ALLOWANCE: 1, BLOCKED: 2}
EXIT_ERROR = 3
ORDER = {PASS: 0, ALLOWANCE: 1, BLOCKED: 2}

ALLOWANCE_BY_TASK = {"g1_motion_tracking": 0.20}
DEFAULT_ALLOWANCE = 0.10  # walking and any task without its own figure
CLOSEOUT_CEILING = 0.25
RESET_DONE_GROWTH = (0.5, 2.0)  # relative, absolute ms: the smaller bound applies
# Higher is better; these are what a change's allowance is spent on. Learning beside collection
# is judged on its own: a change to the streams' hand-offs can cost it alone.
THROUGHPUT = ("env_steps_per_s_streamed", "collector_steps_per_s_no_learning",
              "collector_steps_per_s_with_learning", "collector_steps_per_s_with_learning_overlapped")
SYNCS = ("host_syncs_per_env_step", "host_syncs_per_env_step_cuda")
REDUNDANT = "redundant_physics_steps_in_reset"
# Reported before -> after, not judged (what the optimization follow-up tracks).
REPORTED = ("kernel_ops_per_env_step", "python_calls_per_env_step", "kernel_ops_per_collector_step")


def allowance_for(task: str) -> float:
    return ALLOWANCE_BY_TASK.get(task, DEFAULT_ALLOWANCE)


def _values(side: dict[str, Any], metric: str) -> list[float]:
    return [s[metric] for s in side.get("samples", []) if isinstance(s.get(metric), (int, float))]


def _spread(values: list[float]) -> float:
    """Relative spread (max - min) / median of one side's samples."""
    if len(values) < 2:
        return 0.0
    median = statistics.median(values)
    return (max(values) - min(values)) / median if median else 0.0


def throughput_costs(base: list[float], head: list[float], paired: bool) -> tuple[float, float]:
    """(median cost, worst cost) of head against base; cost = 1 - head/base (positive = slower).
    Paired: per round. Unpaired: medians, and the worst is min(head) against max(base)."""
    if paired and len(base) == len(head):
        costs = [1 - h / b for b, h in zip(base, head, strict=True) if b > 0]
        return statistics.median(costs), max(costs)
    return 1 - statistics.median(head) / statistics.median(base), 1 - min(head) / max(base)


def growths(base: list[float], head: list[float], paired: bool) -> tuple[float, float]:
    """(median, worst) absolute growth head - base."""
    if paired and len(base) == len(head):
        diffs = [h - b for b, h in zip(base, head, strict=True)]
        return statistics.median(diffs), max(diffs)
    return statistics.median(head) - statistics.median(base), max(head) - min(base)


def judge_throughput(case: str, metric: str, base: list[float], head: list[float], paired: bool,
                     allowance: float, baseline: list[float] | None = None) -> dict[str, Any]:
    cost, worst = throughput_costs(base, head, paired)
    noise = max(_spread(base), _spread(head))
    inside_noise = abs(cost) <= noise
    follow_up = f"optimization follow-up: {case} {metric} back to at least the base ({statistics.median(base):.0f})"
    if cost > allowance:
        verdict, why = BLOCKED, f"costs {cost:+.1%} (median), over the {allowance:.0%} allowance"
    elif worst > CLOSEOUT_CEILING:
        verdict, why = BLOCKED, f"worst paired sample costs {worst:+.1%}, over the {CLOSEOUT_CEILING:.0%} ceiling"
    elif cost <= 0 or inside_noise:
        if worst <= allowance:
            verdict, why = PASS, f"{cost:+.1%} (median), worst {worst:+.1%}" + (" inside noise" if cost > 0 else "")
        else:
            verdict, why = ALLOWANCE, (f"inside noise ({noise:.0%}) but the worst paired sample costs {worst:+.1%}, "
                                       f"over the {allowance:.0%} allowance; {follow_up}, or rerun quieter")
    else:
        verdict, why = ALLOWANCE, f"costs {cost:+.1%} (median, noise {noise:.0%}); {follow_up}"
    out = {"metric": metric, "verdict": verdict, "why": why, "cost_median": cost, "cost_worst": worst,
           "noise": noise, "allowance": allowance}
    if baseline:
        closeout = 1 - statistics.median(head) / statistics.median(baseline)
        out["cost_vs_baseline"] = closeout
        if closeout > CLOSEOUT_CEILING:
            out["verdict"], out["why"] = BLOCKED, (f"{closeout:+.1%} against the baseline, over the "
                                                   f"{CLOSEOUT_CEILING:.0%} closeout ceiling")
    return out


def judge_reset_done(base: list[float], head: list[float], paired: bool) -> dict[str, Any]:
    rel, absolute = RESET_DONE_GROWTH
    limit = min(rel * statistics.median(base), absolute)
    growth, worst = growths(base, head, paired)
    if growth > limit:
        verdict, why = BLOCKED, f"grows {growth:+.3f} ms (median), over the {limit:.3f} ms limit"
    elif worst > limit:
        verdict, why = BLOCKED, (f"median {growth:+.3f} ms is inside, but the worst paired sample grows "
                                 f"{worst:+.3f} ms, over the {limit:.3f} ms limit (rerun quieter or longer)")
    else:
        verdict, why = PASS, f"{growth:+.3f} ms (median), worst {worst:+.3f} ms, limit {limit:.3f} ms"
    return {"metric": "reset_done_ms", "verdict": verdict, "why": why, "growth_median_ms": growth,
            "growth_worst_ms": worst, "limit_ms": limit}


def judge_count(metric: str, base: list[float], head: list[float], what: str) -> dict[str, Any]:
    """Counts are deterministic: any increase of the largest count is new."""
    b, h = max(base), max(head)
    if h > b + 1e-9:
        return {"metric": metric, "verdict": BLOCKED, "why": f"new {what}: {b:g} -> {h:g} per step"}
    return {"metric": metric, "verdict": PASS, "why": f"{b:g} -> {h:g} per step"}


# The matrix's timing windows: a longer window or warm-up can time another figure.
TIMING_SETTINGS = ("env_steps", "env_warmup", "collector_seconds")


def measured_on(record: dict[str, Any]) -> dict[str, Any]:
    """What a record's throughput and times depend on beyond the code: where and how wide it ran,
    and its timing windows (None where the record does not say)."""
    settings, machine = record.get("settings") or {}, record.get("machine") or {}
    device = settings.get("device")
    where: dict[str, Any] = {"device": device, "num_envs": settings.get("num_envs")}
    where |= {key: settings.get(key) for key in TIMING_SETTINGS}
    if device != "cpu":  # nvidia-smi's CSV line: index, name, driver, ...
        where["gpus"] = [line.split(", ")[1] for line in machine.get("gpus") or [] if ", " in line] or None
    # The host plane's physics runs on the CPU's threads, and a GPU step is launched from the CPU.
    where["cpu_model"], where["cpus"] = machine.get("cpu_model"), machine.get("sched_affinity")
    where["cpu_family_model_stepping"] = cpu_identity(machine.get("lscpu"))
    return where


def measurement_differences(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """How two records' ``measured_on`` differ, over what both say."""
    return [f"{key} {base[key]} -> {head[key]}" for key in base
            if base[key] is not None and head.get(key) is not None and base[key] != head[key]]


def compare_case(name: str, base: dict[str, Any] | None, head: dict[str, Any] | None, paired: bool,
                 baseline: dict[str, Any] | None = None, counts_only: bool = False) -> dict[str, Any]:
    task = name.split("/")[1] if name.count("/") >= 2 else name
    if head is None or head.get("status") != "ok":
        reason = "case absent in head" if head is None else f"head: {head.get('status')}"
        return {"case": name, "verdict": BLOCKED, "why": reason, "metrics": []}
    if base is None or str(base.get("status", "")).startswith(ABSENT_IN_BASE):
        reason = ABSENT_IN_BASE if base is None else str(base["status"])
        return {"case": name, "verdict": PASS, "why": f"{reason}; head recorded, nothing to compare",
                "metrics": [], "absent_in_base": True}
    if base.get("status") != "ok":
        # The base ran and failed: the comparison asked for did not happen, which is no pass.
        return {"case": name, "verdict": BLOCKED, "why": f"base: {base.get('status')}; nothing compared",
                "metrics": []}
    smoke = bool(head.get("smoke"))
    allowance = allowance_for(task)
    metrics: list[dict[str, Any]] = []

    def judge(metric: str, judged) -> None:
        b, h = _values(base, metric), _values(head, metric)
        if b and h:
            metrics.append(judged(b, h))
        elif b:  # a figure an older base lacks is not compared; one the head lost is no pass
            metrics.append({"metric": metric, "verdict": BLOCKED,
                            "why": "the base has this figure and the head none: nothing compared"})

    if not (smoke or counts_only):
        for metric in THROUGHPUT:
            line = _values(baseline, metric) if baseline and baseline.get("status") == "ok" else None
            judge(metric, lambda b, h, m=metric, line=line: judge_throughput(name, m, b, h, paired, allowance, line))
        judge("reset_done_ms", lambda b, h: judge_reset_done(b, h, paired))
    for metric in SYNCS:
        judge(metric, lambda b, h, m=metric: judge_count(m, b, h, "host sync"))
    judge(REDUNDANT, lambda b, h: judge_count(REDUNDANT, b, h, "redundant physics step in reset"))
    reported = [{"metric": m, "base": max(b), "head": max(h)} for m in REPORTED
                if (b := _values(base, m)) and (h := _values(head, m))]
    verdict = max((m["verdict"] for m in metrics), key=ORDER.__getitem__, default=PASS)
    worst = [m for m in metrics if m["verdict"] == verdict and verdict != PASS]
    counted = "smoke: counts only" if smoke else "not measured alike: counts only" if counts_only else "inside budget"
    why = "; ".join(f"{m['metric']}: {m['why']}" for m in worst) or counted
    return {"case": name, "verdict": verdict, "why": why, "metrics": metrics, "reported": reported,
            "smoke": smoke, "allowance": allowance, "paired": paired}


def compare_records(base_cases: dict[str, Any], head_cases: dict[str, Any], paired: bool,
                    baseline_cases: dict[str, Any] | None = None, counts_only: bool = False) -> dict[str, Any]:
    results = [compare_case(name, base_cases.get(name), head_cases.get(name), paired,
                            (baseline_cases or {}).get(name), counts_only)
               for name in sorted(set(head_cases) | set(base_cases))]
    verdict = max((r["verdict"] for r in results), key=ORDER.__getitem__, default=PASS)
    return {"verdict": verdict, "exit_code": EXIT[verdict], "paired": paired, "counts_only": counts_only,
            "cases": results,
            "budget": {"allowance_by_task": ALLOWANCE_BY_TASK, "default_allowance": DEFAULT_ALLOWANCE,
                       "closeout_ceiling": CLOSEOUT_CEILING, "reset_done_growth_limit": RESET_DONE_GROWTH}}


def partial_rounds(path: Path, record: dict[str, Any]) -> str | None:
    """``"PATH: R of N rounds"`` for a record its run did not finish, else None."""
    if record.get("complete", True):
        return None
    return f"{path}: {record['rounds_done']} of {record['settings']['rounds']} rounds"


def format_table(result: dict[str, Any]) -> str:
    pairing = "paired per round" if result["paired"] else "unpaired (separate runs)"
    if result.get("counts_only"):
        pairing += "; per-step counts only"
    if result.get("partial_records"):
        pairing += "; partial record " + ", ".join(result["partial_records"])
    lines = [f"budget comparison ({pairing}): {result['verdict']} (exit {result['exit_code']})",
             "| case | verdict | metric | detail |", "|---|---|---|---|"]
    for r in result["cases"]:
        if not r["metrics"]:
            lines.append(f"| {r['case']} | {r['verdict']} | - | {r['why']} |")
        for m in r["metrics"]:
            lines.append(f"| {r['case']} | {m['verdict']} | {m['metric']} | {m['why']} |")
        for m in r.get("reported", ()):
            lines.append(f"| {r['case']} | reported | {m['metric']} | {m['base']:g} -> {m['head']:g} per step |")
    return "\n".join(lines)


def _read(path: Path) -> dict[str, Any]:
    record = json.loads(path.read_text())
    if record.get("benchmark") != "unilab_bench.matrix":
        raise ValueError(f"{path}: not a unilab-bench matrix record")
    return record


def _sides(record: dict[str, Any], side: str) -> dict[str, Any]:
    return {name: case.get(side) for name, case in record["cases"].items() if case.get(side) is not None}


def _measured_alike(base_path: Path, base: dict[str, Any], head_path: Path, head: dict[str, Any]) -> None:
    """Refuse two records not measured alike, naming how they differ."""
    differences = measurement_differences(measured_on(base), measured_on(head))
    if differences:
        raise ValueError(f"{base_path} and {head_path} were not measured alike ({'; '.join(differences)}): "
                         "their throughput and times do not compare. Measure both alike on one machine (matrix --base), "
                         "or pass --counts-only to judge the per-step counts alone")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="unilab-bench compare", description=__doc__.split("\n")[0])
    p.add_argument("records", nargs="+", type=Path, metavar="RECORD.json",
                   help="BASE.json HEAD.json (the 'head' side of each), or one matrix --base record")
    p.add_argument("--baseline", type=Path, help="the migration's baseline record (closeout ceiling)")
    p.add_argument("--json", type=Path, help="write the comparison here")
    p.add_argument("--record", type=Path, metavar="STORE",
                   help="also append a compact record of the verdicts to this results store")
    p.add_argument("--counts-only", action="store_true",
                   help="judge the per-step counts alone (host syncs, redundant physics): for records measured "
                        "unalike (another machine or timing window), which are otherwise refused")
    try:
        args = p.parse_args(argv)
    except SystemExit as stop:
        return EXIT_ERROR if stop.code else 0
    try:
        if len(args.records) == 1:
            head_record = _read(args.records[0])
            base, head, paired = _sides(head_record, "base"), _sides(head_record, "head"), True
            if not base:
                raise ValueError(f"{args.records[0]}: no base side; give BASE.json HEAD.json")
            other_records = {}
        elif len(args.records) == 2:
            base_record, head_record = _read(args.records[0]), _read(args.records[1])
            base, head, paired = _sides(base_record, "head"), _sides(head_record, "head"), False
            other_records = {args.records[0]: base_record}
        else:
            raise ValueError("give BASE.json HEAD.json, or one matrix --base record")
        baseline_record = _read(args.baseline) if args.baseline else None
        if baseline_record is not None:
            other_records[args.baseline] = baseline_record
        if not args.counts_only:
            for path, record in other_records.items():
                _measured_alike(path, record, args.records[-1], head_record)
        baseline = _sides(baseline_record, "head") if baseline_record is not None else None
        result = compare_records(base, head, paired, baseline, args.counts_only)
        result["partial_records"] = [note for path, record in
                                     [*other_records.items(), (args.records[-1], head_record)]
                                     if (note := partial_rounds(path, record))]
    except (OSError, ValueError, KeyError) as error:
        print(f"unilab-bench compare: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    print(format_table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    record_to(args.record, compare_record(result, head_record, records=[str(p) for p in args.records],
                                          command=command_line()))
    return result["exit_code"]


if __name__ == "__main__":
    sys.exit(main())
