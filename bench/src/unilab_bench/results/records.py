"""Compact store records from what the tools write: an env, collector or matrix benchmark's JSON,
a ``compare`` result, and a finished ``unilab-train`` run's folder (``summary.json``, ``run.json``
and, with ``--eval``, ``eval/`` and ``eval-latest-actor/``).

Figures are taken as the tools wrote them (no rounding here; the tables round when they print).
``figures`` by kind:

- ``env``: ``env_steps_per_s`` and ``raw_steps_per_s`` (min/median/max, zero policy and raw physics
  of a standing robot), ``ratio_to_raw`` (of medians); with ``--gap-rows`` ``raw_replaying_steps_per_s``
  and ``ratio_to_replay`` (the env against raw physics replaying its own state writes: the same
  physics workload without the runtime); with ``--compare-task`` ``compare_steps_per_s`` and
  ``compare_to_replay``; with ``--reference`` ``reference_steps_per_s`` and ``env_to_reference``;
  ``kernel_ops_per_env_step``, ``host_syncs_per_env_step``.
- ``collector``: ``env_steps_per_s_<mode>`` (min/median/max; modes ``no_learning``, ``with_learning``,
  ``with_learning_overlapped``), ``env_alone_steps_per_s``, ``of_env_alone`` and
  ``of_env_alone_replaying_actions`` (each mode's median fraction of the env alone in its rounds).
- ``matrix``: per case the head's (and base's) round medians of the matrix's fixed figures, and the
  comparison's verdicts where there was a base.
- ``compare``: the verdict, and per case its verdict and each throughput figure's median cost.
- ``training``: ``train_s``, ``env_steps``, ``updates``, ``env_steps_per_s_learning``, start-up
  (``startup_s``, ``imports_s``, ``writes_bytecode``), ``eval`` (the last checkpoint judged: actor,
  passed, cases passed of cases, the protocol's overall figures), ``time_to_pass_s`` (the earliest
  judged checkpoint that passed), ``eval_latest_actor`` where the run kept an averaged policy.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from unilab_rl.machine_info import cpu_identity

from unilab_bench.results.store import make_record

OVERRIDE = re.compile(r"^[a-z_][\w.]*=")  # lower case: an environment variable before the command is not one
# Overrides that choose what is kept or logged, not what is trained: left out of a run's entry.
NOT_TRAINING = ("runner.snapshot_at_s=", "runner.snapshot_at_steps=", "snapshot_at_s=", "snapshot_at_steps=",
                "log_every=", "checkpoint_every=", "runner.log_every=", "runner.checkpoint_every=")


def today() -> str:
    return datetime.date.today().isoformat()


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: a console script by its name, a module run as ``python -m``."""
    argv = list(sys.argv if argv is None else argv)
    head = argv[0] if argv else ""
    name = os.path.basename(head)
    if name.endswith(".py"):  # python -m pkg.module: argv[0] is the module's file
        module = _module_of(Path(head))
        name = f"python -m {module}" if module else f"python {head}"
    return " ".join([name, *(shlex.quote(a) for a in argv[1:])]).strip()


def _module_of(path: Path) -> str | None:
    parts = list(path.with_suffix("").parts)
    for anchor in ("src",):
        if anchor in parts:
            return ".".join(parts[len(parts) - parts[::-1].index(anchor):])
    return None


def command_text(command: str | list[str] | None) -> str | None:
    """A recorded command (string or argv list) as one string, its program by name."""
    if command is None:
        return None
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    return command_line(argv) if argv else None


def overrides_of(command: str | list[str] | None) -> list[str]:
    """The ``key=value`` tokens of a command (``eval.`` ones are the evaluation's, left out)."""
    if command is None:
        return []
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    return [a for a in argv[1:] if OVERRIDE.match(a) and not a.startswith("eval.")]


def flag_value(command: str | list[str] | None, flag: str) -> str | None:
    if command is None:
        return None
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    for i, token in enumerate(argv):
        if token == flag and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(flag + "="):
            return token.split("=", 1)[1]
    return None


def machine_names(machine: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(GPU name, CPU) of a ``unilab_rl.machine_info.machine()`` dict: the first GPU's name; the CPU
    by name, with lscpu's family/model/stepping and the CPU count where known."""
    if not machine:
        return None, None
    gpus = machine.get("gpus") or []
    gpu = gpus[0].split(",")[1].strip() if gpus and "," in gpus[0] else None
    parts = [machine.get("cpu_model")]
    identity = cpu_identity(machine.get("lscpu"))
    if identity:
        parts.append(f"({identity})")
    if machine.get("logical_cpus"):
        parts.append(f"x{machine['logical_cpus']}")
    cpu = " ".join(p for p in parts if p) or None
    return gpu, cpu


def known_commit(commit: str | None) -> str | None:
    """A commit as recorded, or None where the run could not tell (a copy without git)."""
    if not commit or str(commit).startswith("unknown"):
        return None
    return str(commit)


def _stats(value: Any) -> dict[str, float] | None:
    if isinstance(value, dict) and {"min", "median", "max"} <= set(value):
        return {k: value[k] for k in ("min", "median", "max")}
    return None


def _compact(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None}


# ---- env ----------------------------------------------------------------------------------------
def env_figures(full: dict[str, Any]) -> dict[str, Any]:
    rates = full.get("env_steps_per_s") or {}
    ratios = full.get("ratio_to_raw_median") or {}
    medians = {name: (stats or {}).get("median") for name, stats in rates.items()}
    replay, compare = medians.get("raw_replaying_env_writes"), medians.get("env_compare")
    dispatch = full.get("dispatch_per_env_step") or {}
    return _compact({
        "env_steps_per_s": _stats(rates.get("env_zero")),
        "raw_steps_per_s": _stats(rates.get("raw")),
        "ratio_to_raw": ratios.get("env_zero"),
        "raw_replaying_steps_per_s": _stats(rates.get("raw_replaying_env_writes")),
        "ratio_to_replay": ratios.get("env_vs_raw_replaying_env_writes"),
        "compare_steps_per_s": _stats(rates.get("env_compare")),
        "compare_to_replay": compare / replay if compare and replay else None,
        "reference_steps_per_s": _stats((full.get("reference") or {}).get("steps_per_s")),
        "env_to_reference": full.get("env_to_reference_ratio"),
        "kernel_ops_per_env_step": dispatch.get("kernel_ops_per_step"),
        "host_syncs_per_env_step": dispatch.get("host_syncs_per_step"),
    })


def env_record(full: dict[str, Any], *, command: str | None = None, source: str | None = None,
               date: str | None = None, commit: str | None = None, caches: str | None = None,
               gpu: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    """A store record of ``unilab-bench env``'s JSON record."""
    machine_gpu, machine_cpu = machine_names(full.get("machine"))
    subject = _compact({
        "task": full.get("task"), "backend": full.get("backend"), "num_envs": full.get("num_envs"),
        "device": str(full.get("device", "")).split(":")[0] or None,
        "overrides": list(full.get("overrides") or []) or None,
        "compare_task": full.get("comparison_task") or None,
        "compare_overrides": list(full.get("comparison_overrides") or []) or None,
        "torch_threads": full.get("torch_threads") if str(full.get("device", "")).startswith("cpu") else None,
    })
    return make_record("env", date or str(full.get("time") or today())[:10], subject, env_figures(full),
                       gpu=gpu or full.get("gpu") or machine_gpu, cpu=cpu or machine_cpu, caches=caches,
                       commit=commit or known_commit(full.get("git_commit")),
                       command=command or command_text(full.get("command")), source=source)


# ---- collector ----------------------------------------------------------------------------------
MODES = ("no_learning", "with_learning", "with_learning_overlapped")


def collector_figures(full: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {f"env_steps_per_s_{m}": _stats(full.get(f"env_steps_per_s_{m}")) for m in MODES}
    figures["env_alone_steps_per_s"] = _stats(full.get("env_steps_per_s_env_alone"))
    for key in ("of_env_alone", "of_env_alone_replaying_actions"):
        by_mode = full.get(key) or {}
        figures[key] = _compact({m: (by_mode.get(m) or {}).get("median") for m in MODES}) or None
    dispatch = full.get("dispatch_per_collector_step") or {}
    figures["kernel_ops_per_collector_step"] = dispatch.get("kernel_ops_per_collector_step")
    figures["host_syncs_per_collector_step"] = dispatch.get("host_syncs_per_collector_step")
    return _compact(figures)


def collector_record(full: dict[str, Any], *, command: str | None = None, source: str | None = None,
                     date: str | None = None, commit: str | None = None, caches: str | None = None,
                     gpu: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    """A store record of ``unilab-bench collector``'s JSON record."""
    machine_gpu, machine_cpu = machine_names(full.get("machine"))
    device = str(full.get("device", "")).split(":")[0] or None
    recorded = full.get("command")
    config = full.get("algo_config") or {}
    subject = _compact({
        "task": full.get("task"), "backend": full.get("backend"), "algo": full.get("algo"),
        "num_envs": full.get("num_envs"), "device": device, "preset": flag_value(recorded, "--preset"),
        "updates_per_step": config.get("updates_per_step"), "overrides": overrides_of(recorded) or None,
    })
    device_name = full.get("device_name") if device == "cuda" else None
    return make_record("collector", date or today(), subject, collector_figures(full),
                       gpu=gpu or device_name or machine_gpu, cpu=cpu or machine_cpu, caches=caches,
                       commit=commit or known_commit(full.get("git_commit")),
                       command=command or command_text(recorded), source=source)


# ---- matrix and compare -------------------------------------------------------------------------
MATRIX_FIGURES = ("env_steps_per_s_streamed", "env_to_raw_ratio_streamed", "env_to_replay_ratio_streamed",
                  "collector_steps_per_s_no_learning", "collector_steps_per_s_with_learning",
                  "collector_steps_per_s_with_learning_overlapped", "collector_of_env_alone_with_learning_overlapped",
                  "kernel_ops_per_env_step", "host_syncs_per_env_step")


def _side_medians(side: dict[str, Any] | None) -> dict[str, Any] | None:
    stats = (side or {}).get("stats") or {}
    medians = _compact({m: (stats.get(m) or {}).get("median") for m in MATRIX_FIGURES})
    return medians or None


def matrix_record(full: dict[str, Any], *, command: str | None = None, source: str | None = None,
                  date: str | None = None, commit: str | None = None, base_commit: str | None = None,
                  caches: str | None = None, gpu: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    """A store record of ``unilab-bench matrix``'s JSON record (with ``--base``, both sides)."""
    machine_gpu, machine_cpu = machine_names(full.get("machine"))
    verdicts = {c["case"]: c["verdict"] for c in (full.get("comparison") or {}).get("cases", [])}
    cases = {}
    for name, sides in full.get("cases", {}).items():
        cases[name] = _compact({"head": _side_medians(sides.get("head")), "base": _side_medians(sides.get("base")),
                                "verdict": verdicts.get(name)})
    settings = full.get("settings") or {}
    base = full.get("base") or {}
    subject = _compact({
        "cases": sorted(cases), "device": settings.get("device"), "num_envs": settings.get("num_envs"),
        "rounds": settings.get("rounds"), "rounds_done": full.get("rounds_done"), "complete": full.get("complete"),
        "base_commit": base_commit or (known_commit(base.get("commit")) if base else None),
    })
    figures = _compact({"cases": cases, "verdict": (full.get("comparison") or {}).get("verdict")})
    return make_record("matrix", date or str(full.get("time") or today())[:10], subject, figures,
                       gpu=gpu or machine_gpu, cpu=cpu or machine_cpu, caches=caches,
                       commit=commit or known_commit((full.get("head") or {}).get("commit")),
                       command=command or command_text(full.get("command")), source=source)


def compare_record(result: dict[str, Any], head: dict[str, Any], *, records: list[str], command: str | None = None,
                   source: str | None = None, date: str | None = None) -> dict[str, Any]:
    """A store record of a ``unilab-bench compare`` result; ``head`` is the head matrix record."""
    gpu, cpu = machine_names(head.get("machine"))
    cases = {}
    for case in result.get("cases", []):
        costs = {m["metric"]: m["cost_median"] for m in case.get("metrics", []) if "cost_median" in m}
        cases[case["case"]] = _compact({"verdict": case["verdict"], "cost_median": costs or None})
    subject = _compact({"records": records, "paired": result.get("paired"), "counts_only": result.get("counts_only")})
    figures = {"verdict": result["verdict"], "exit_code": result["exit_code"], "cases": cases}
    return make_record("compare", date or str(head.get("time") or today())[:10], subject, figures, gpu=gpu, cpu=cpu,
                       commit=known_commit((head.get("head") or {}).get("commit")),
                       command=command or command_line(), source=source)


# ---- training -----------------------------------------------------------------------------------
def over_time_of_report(report: dict[str, Any]) -> dict[str, Any]:
    """A single checkpoint's ``report.json`` in ``over-time.json``'s form (one row)."""
    row = {"checkpoint": Path(str(report.get("checkpoint") or report.get("policy") or "checkpoint.pt")).name,
           "actor": report.get("actor"), "trained_wall_s": report.get("trained_wall_s"),
           "trained_env_steps": report.get("trained_env_steps")}
    for backend, r in (report.get("reports") or {}).items():
        cell = {"passed": r["passed"], "cases_passed": sum(bool(c["passed"]) for c in r["cases"]),
                "cases": len(r["cases"])}
        if "overall" in r:
            cell["overall"] = r["overall"]
        row[backend] = cell
    return {"evaluated_on": report.get("evaluated_on"), "checkpoints": [row]}


def _cells(row: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in row.items() if isinstance(v, dict) and "cases_passed" in v}


def judged(over_time: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last judged checkpoint (every backend), and the first that passed on all of them."""
    rows = (over_time or {}).get("checkpoints") or []
    if not rows:
        return None
    last = rows[-1]
    cells = _cells(last)
    first = next((r for r in rows if _cells(r) and all(c["passed"] for c in _cells(r).values())), None)
    overall = next((c["overall"] for c in cells.values() if "overall" in c), None)
    result = _compact({
        "evaluated_on": over_time.get("evaluated_on"), "actor": last.get("actor"), "backends": sorted(cells),
        "passed": all(c["passed"] for c in cells.values()),
        "cases_passed": min(c["cases_passed"] for c in cells.values()),
        "cases": max(c["cases"] for c in cells.values()), "overall": overall,
        "checkpoints": len(rows),
        "time_to_pass_s": None if first is None else first.get("trained_wall_s"),
        "env_steps_to_pass": None if first is None else first.get("trained_env_steps"),
    })
    if len(rows) > 1:
        result["over_time"] = [[r.get("trained_wall_s"), r.get("trained_env_steps"),
                                min(c["cases_passed"] for c in _cells(r).values())] for r in rows if _cells(r)]
    return result


def training_record(summary: dict[str, Any], run: dict[str, Any] | None = None,
                    over_time: dict[str, Any] | None = None, latest_actor: dict[str, Any] | None = None, *,
                    date: str, entry: str | None = None, caches: str | None = None, commit: str | None = None,
                    command: str | None = None, source: str | None = None, seed: int | None = None,
                    gpu: str | None = None, cpu: str | None = None) -> dict[str, Any]:
    """A store record of one training run: its summary, run record and evaluation."""
    run = run or {}
    machine_gpu, machine_cpu = machine_names(summary.get("machine"))
    recorded = run.get("command")
    budget = run.get("budget") or {}
    overrides = overrides_of(recorded) if recorded else []
    preset = run.get("preset")
    algo = summary.get("algo") or run.get("algo")
    subject = _compact({
        "task": summary.get("task"), "backend": summary.get("backend"), "algo": algo,
        "num_envs": summary.get("num_envs"), "seed": run.get("seed", seed), "preset": preset,
        "minutes": budget.get("minutes"), "steps": budget.get("steps"), "overrides": overrides or None,
        "entry": entry or default_entry(preset, algo, overrides, summary.get("task")),
    })
    imports = summary.get("imports_s")
    figures = _compact({
        "train_s": summary.get("wall_s"), "env_steps": summary.get("env_steps"), "updates": summary.get("updates"),
        "env_steps_per_s_learning": summary.get("median_env_steps_per_s_learning"),
        "startup_s": summary.get("startup_s"), "imports_s": imports,
        "writes_bytecode": summary.get("writes_bytecode"), "first_learning_s": summary.get("first_learning_s"),
        "goals_met_at_end": summary.get("goals_met_at_end"),
        "eval": judged(over_time), "eval_latest_actor": judged(latest_actor),
    })
    return make_record("training", date, subject, figures, gpu=gpu or machine_gpu, cpu=cpu or machine_cpu,
                       caches=caches, commit=commit or known_commit(run.get("git_commit")),
                       command=command or command_text(recorded), source=source)


def default_entry(preset: str | None, algo: str | None, overrides: list[str], task: str | None) -> str:
    """What the run trained as: ``preset/algo`` and the overrides it added (the tables group by it)."""
    head = f"{preset}/{algo}" if preset else f"{task}/{algo}"
    return " ".join([head, *(o for o in overrides if not o.startswith(NOT_TRAINING))])


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def _evaluation(folder: Path) -> dict[str, Any] | None:
    over_time = _json(folder / "over-time.json")
    if over_time is not None:
        return over_time
    report = _json(folder / "report.json")
    return over_time_of_report(report) if report is not None else None


def run_folders(run_dir: Path) -> list[Path]:
    """The run folders under RUN_DIR: itself, or each ``seed-K/`` of a ``--seeds`` run (``seeds.json``)."""
    if (run_dir / "seeds.json").exists():
        folders = sorted((p for p in run_dir.glob("seed-*") if p.is_dir()), key=lambda p: int(p.name[5:]))
        if not folders:
            raise ValueError(f"{run_dir}: seeds.json but no seed-K folder")
        return folders
    return [run_dir]


def run_records(run_dir: Path, *, entry: str | None = None, caches: str | None = None,
                date: str | None = None, source: str | None = None) -> list[dict[str, Any]]:
    """Store records of a finished ``unilab-train`` run folder (one per seed of a ``--seeds`` run):
    ``summary.json``, ``run.json`` (or ``run/run.json``), and ``eval/`` and ``eval-latest-actor/``
    (``over-time.json``, else ``report.json``) where ``--eval`` judged it."""
    records = []
    for folder in run_folders(Path(run_dir)):
        summary_path = folder / "summary.json"
        summary = _json(summary_path)
        if summary is None:
            raise ValueError(f"{folder}: no summary.json (a finished unilab-train run writes it)")
        run = _json(folder / "run.json") or _json(folder / "run" / "run.json")
        when = date or datetime.date.fromtimestamp(summary_path.stat().st_mtime).isoformat()
        records.append(training_record(summary, run, _evaluation(folder / "eval"),
                                       _evaluation(folder / "eval-latest-actor"), date=when, entry=entry,
                                       caches=caches, source=source or str(folder)))
    return records


def bench_record(full: dict[str, Any], **meta: Any) -> dict[str, Any]:
    """A store record of any benchmark JSON this package writes, by its ``benchmark`` field."""
    kind = full.get("benchmark")
    if kind == "unilab_bench.env_step":
        return env_record(full, **meta)
    if kind == "collector":
        return collector_record(full, **meta)
    if kind == "unilab_bench.matrix":
        return matrix_record(full, **meta)
    raise ValueError(f"not an env, collector or matrix benchmark record (benchmark: {kind!r})")

