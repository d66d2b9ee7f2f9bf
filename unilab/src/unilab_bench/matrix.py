"""The minimum performance matrix: each case a collector (policy + env + replay insert, with and
without learning) next to the env alone (streamed) and raw physics of the same scene.

    unilab-bench matrix                                  # cpu machine: the mujoco CPU profile cases
    unilab-bench matrix --device cuda --num-envs 4096    # every case
    unilab-bench matrix --cases '*/g1_walk_flat/*' --base HEAD~3 --out run.json

A case is ``algo/task/backend``. Each case is measured by the per-case runners every tree has,
one process per run, which write JSON: ``python -m unilab_bench.env_step`` (env streamed vs raw
physics, paired drift control, phases, cProfile calls, host syncs, backend counters and
diagnostics) and ``python -m unilab_rl.cli.bench collector`` (collector steps/s with and
without learning, policy/env/replay/learner ms, host syncs per collector step). The env
figures of one task/backend are shared by the cases of both algorithms.

``--rounds`` (>= 3) rounds interleave every process: in each round each case runs once per
side. With ``--base REV`` the base side runs from a temporary ``git worktree`` of REV with
that tree's own code (PYTHONPATH to its unisim-core/src, unilab/src, unilab_rl/src), in
ABBA order, so every comparison is paired per round on the same machine; the record is then
classified by the staged budget (unilab_bench.compare) and the exit code is compare's. A
base needs ``unilab_bench.env_step`` (``--out``) and ``unilab-bench collector`` (``--json``);
a case whose task or runner the base lacks is recorded as "case absent in base".
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from unilab_bench import compare

ROOT = Path(__file__).resolve().parents[3]  # the repository holding this tree
SOURCE_DIRS = ("unisim-core/src", "unilab/src", "unilab_rl/src")
# Learner sizes for the CPU profile: the GPU presets' networks take seconds per update on a core.
CPU_LEARNER = ("batch_size=128", "updates_per_step=1", "actor_width=64", "critic_width=64",
               "replay_capacity_per_env=64")
GPU_LEARNER = ("--preset", "gpu_walk", "replay_capacity_per_env=64")


@dataclass(frozen=True)
class Case:
    algo: str
    task: str
    backend: str
    cpu_profile: bool = False  # runs on the host whatever --device says
    smoke: bool = False  # short windows, counts gated, throughput not

    @property
    def name(self) -> str:
        return f"{self.algo}/{self.task}/{self.backend}"


def _cases() -> list[Case]:
    base = [("flashsac", "g1_motion_tracking"), ("flashsac", "g1_walk_flat"), ("fastsac", "g1_walk_flat")]
    return ([Case(a, t, "mjwarp") for a, t in base] + [Case(a, t, "genesis", smoke=True) for a, t in base]
            + [Case(a, t, "mujoco", cpu_profile=True) for a, t in base])


CASES = _cases()


def select_cases(patterns: str | None, device: str) -> list[Case]:
    """``--cases`` globs (comma-separated) on case names; by default every case on a GPU
    device and the mujoco CPU profile cases on a CPU-only machine."""
    if not patterns:
        return [c for c in CASES if c.cpu_profile or not device.startswith("cpu")]
    chosen = [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p.strip()) for p in patterns.split(","))]
    if not chosen:
        raise ValueError(f"--cases {patterns!r} matches no case; cases: {', '.join(c.name for c in CASES)}")
    return chosen


# ---- the machine ------------------------------------------------------------------------
def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _run_text(cmd: list[str]) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def machine() -> dict[str, Any]:
    """What the numbers depend on, recorded whether or not it could be controlled."""
    cpuinfo = _read("/proc/cpuinfo") or ""
    models = [line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")]
    governor_path = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    gpus = _run_text(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm,"
                      "power.limit,persistence_mode", "--format=csv,noheader"])
    return {
        "hostname": platform.node(), "platform": platform.platform(),
        "cpu_model": models[0] if models else platform.processor() or None,
        "logical_cpus": os.cpu_count(), "sched_affinity": len(os.sched_getaffinity(0)),
        "scaling_governor": _read(governor_path),
        "governor_controllable": os.access(governor_path, os.W_OK),
        "numa_nodes": nodes, "load_average": list(os.getloadavg()),
        "lscpu": _run_text(["lscpu"]),
        "gpus": gpus.splitlines() if gpus else None,
        "gpu_topology": _run_text(["nvidia-smi", "topo", "-m"]),
    }


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "mujoco", "mujoco-warp", "warp-lang", "genesis-world"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=cwd).stdout.strip()


# ---- one tree ---------------------------------------------------------------------------
PROBE = """
import importlib.util, json
out = {"env_step": importlib.util.find_spec("unilab_bench.env_step") is not None,
       "collector": importlib.util.find_spec("unilab_rl.cli.bench") is not None, "tasks": None,
       "reference_tracking": importlib.util.find_spec("unilab_bench.reference_tracking") is not None}
if out["env_step"]:  # the flag that turns its comparison owner off (renamed from --unfused-task)
    source = open(importlib.util.find_spec("unilab_bench.env_step").origin).read()
    out["compare_flag"] = "--compare-task" if "--compare-task" in source else "--unfused-task"
try:
    from unilab.registry import list_tasks
    out["tasks"] = sorted(list_tasks())
except Exception as error:  # an old tree: tasks unknown, runs will tell
    out["error"] = repr(error)
print(json.dumps(out))
"""


@dataclass
class Tree:
    label: str  # "head" or "base"
    root: Path
    commit: str

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(self.root / d) for d in SOURCE_DIRS]
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        return env

    def probe(self) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=self.env(),
                              cwd=self.root, timeout=300)
        if done.returncode:
            return {"env_step": False, "collector": False, "tasks": None, "error": done.stderr[-2000:]}
        return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class Settings:
    device: str
    num_envs: int
    rounds: int
    env_steps: int
    env_warmup: int
    collector_seconds: float
    collector_samples: int
    timeout_s: float

    def for_case(self, case: Case) -> tuple[str, int, float]:
        """(device, env steps, collector seconds) of a case."""
        device = "cpu" if case.cpu_profile else self.device
        if case.smoke:
            return device, max(5, self.env_steps // 4), min(1.0, self.collector_seconds)
        return device, self.env_steps, self.collector_seconds


# Tasks whose hand-fused reference loop (the direct-runtime baseline) the env bench can time.
REFERENCE_LOOPS = {"g1_motion_tracking": "tracking"}


def env_command(case: Case, s: Settings, out: Path, reference: bool = False,
                compare_flag: str = "--compare-task") -> list[str]:
    """``reference``: also time the task's hand-fused reference loop (a tree that has one);
    ``compare_flag``: the tree's name for the comparison-owner option, given '' (none)."""
    device, steps, _ = s.for_case(case)
    extra = ["--reference", REFERENCE_LOOPS[case.task]] if reference and case.task in REFERENCE_LOOPS else []
    return [sys.executable, "-m", "unilab_bench.env_step", "--backend", case.backend, "--task", case.task,
            "--num-envs", str(s.num_envs), "--device", device, compare_flag, "", "--steps", str(steps),
            "--samples", "3", "--warmup", str(s.env_warmup), "--out", str(out), *extra]


def collector_command(case: Case, s: Settings, out: Path) -> list[str]:
    device, _, seconds = s.for_case(case)
    learner = CPU_LEARNER if device.startswith("cpu") else GPU_LEARNER
    return [sys.executable, "-m", "unilab_rl.cli.bench", "collector", "--task", case.task, "--backend", case.backend,
            "--algo", case.algo, "--num-envs", str(s.num_envs), "--device", device, "--seconds", str(seconds),
            "--samples", str(s.collector_samples), "--json", str(out), *learner]


def run_unit(tree: Tree, cmd: list[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """One process of one tree; its JSON record, or why there is none."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=tree.env(), cwd=tree.root, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": f"failed: timed out after {timeout_s:.0f} s", "wall_s": timeout_s}
    wall = time.perf_counter() - t0
    if done.returncode or not out.exists():
        tail = (done.stderr or done.stdout)[-1500:]
        return {"status": f"failed: exit {done.returncode}", "stderr_tail": tail, "wall_s": wall}
    record = json.loads(out.read_text())
    record["_wall_s"] = wall
    return {"status": "ok", "record": record, "wall_s": wall}


# ---- figures by name --------------------------------------------------------------------
def _get(record: dict[str, Any] | None, *keys: str) -> Any:
    value: Any = record
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def case_metrics(env: dict[str, Any] | None, collector: dict[str, Any] | None) -> dict[str, Any]:
    """One round's figures of one case, by their fixed names (None where a record lacks one)."""
    phases = _get(env, "phases_ms_per_step") or {}
    cphases = _get(collector, "phase_ms_with_learning") or {}
    return {
        "collector_steps_per_s_no_learning": _get(collector, "env_steps_per_s_no_learning", "median"),
        "collector_steps_per_s_with_learning": _get(collector, "env_steps_per_s_with_learning", "median"),
        "env_steps_per_s_streamed": _get(env, "env_steps_per_s", "env_zero", "median"),
        "env_random_steps_per_s_streamed": _get(env, "env_steps_per_s", "env_random", "median"),
        "raw_physics_steps_per_s_streamed": _get(env, "env_steps_per_s", "raw", "median"),
        "env_to_raw_ratio_streamed": _get(env, "ratio_to_raw_median", "env_zero"),
        "paired_single_step_ratio_drift_control": _get(env, "paired_ratio_to_raw", "env_zero", "median"),
        "update_state_ms": phases.get("update_state_ms"),
        "reset_done_ms": phases.get("reset_done_ms"),
        "reset_done_reset_call_ms": phases.get("reset_done_reset_call_ms"),
        "backend_step_ms": phases.get("backend_step_ms"),
        "env_step_total_ms": phases.get("step_total_ms"),
        "policy_ms": cphases.get("policy_ms"),
        "collector_env_step_ms": cphases.get("env_step_ms"),
        "replay_ms": cphases.get("replay_ms"),  # replay insert and the collector's bookkeeping
        "learner_ms": cphases.get("learner_ms"),
        "python_calls_per_env_step": _get(env, "python_calls_per_env_step"),
        "redundant_physics_steps_in_reset": _get(env, "backend_counters", "redundant_physics_steps_per_env_step"),
        "host_syncs_per_env_step": _get(env, "dispatch_per_env_step", "host_syncs_per_step"),
        "host_syncs_per_env_step_cuda": _get(env, "host_syncs_per_env_step"),
        "host_syncs_per_collector_step": _get(collector, "dispatch_per_collector_step", "host_syncs_per_collector_step"),
        "kernel_ops_per_env_step": _get(env, "dispatch_per_env_step", "kernel_ops_per_step"),
        # The direct-runtime baseline, where the task has a hand-fused reference loop.
        "reference_steps_per_s_streamed": _get(env, "reference", "steps_per_s", "median"),
        "env_to_reference_ratio_streamed": _get(env, "env_to_reference_ratio"),
        "reference_kernel_ops_per_step": _get(env, "reference", "dispatch_per_step", "kernel_ops_per_step"),
    }


def summarize_side(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    stats: dict[str, dict[str, float]] = {}
    for key in samples[0] if samples else ():
        values = [s[key] for s in samples if isinstance(s.get(key), (int, float))]
        if values:
            stats[key] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    return stats


# ---- the driver -------------------------------------------------------------------------
def _side(status: str, smoke: bool) -> dict[str, Any]:
    return {"status": status, "smoke": smoke, "samples": [], "units": []}


def run_matrix(cases: list[Case], settings: Settings, trees: list[Tree], workdir: Path,
               log=print) -> dict[str, dict[str, Any]]:
    """Every round: each case once per tree (ABBA order between rounds). Returns
    {case name: {tree label: side}}; a side holds the per-round figures and its status."""
    capabilities = {t.label: t.probe() for t in trees}
    results: dict[str, dict[str, Any]] = {}
    for case in cases:
        results[case.name] = {}
        for tree in trees:
            cap = capabilities[tree.label]
            if not (cap.get("env_step") and cap.get("collector")):
                status = "case absent in base: no per-case runner" if tree.label == "base" else "runner missing"
            elif cap.get("tasks") is not None and case.task not in cap["tasks"]:
                status = f"case absent in {tree.label}: no task {case.task}"
            else:
                status = "ok"
            results[case.name][tree.label] = _side(status, case.smoke)
    env_cache: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for r in range(settings.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for case in cases:
            for tree in order:
                side = results[case.name][tree.label]
                if side["status"] != "ok":
                    continue
                env_key = (tree.label, case.task, case.backend, r)
                if env_key not in env_cache:
                    out = workdir / f"{tree.label}-r{r}-env-{case.task}-{case.backend}.json"
                    cap = capabilities[tree.label]
                    cmd = env_command(case, settings, out, bool(cap.get("reference_tracking")),
                                      cap.get("compare_flag", "--compare-task"))
                    env_cache[env_key] = run_unit(tree, cmd, out, settings.timeout_s)
                env_unit = env_cache[env_key]
                out = workdir / f"{tree.label}-r{r}-collector-{case.algo}-{case.task}-{case.backend}.json"
                col_unit = run_unit(tree, collector_command(case, settings, out), out, settings.timeout_s)
                for kind, unit in (("env", env_unit), ("collector", col_unit)):
                    side["units"].append({"round": r, "kind": kind, "status": unit["status"],
                                          "wall_s": unit.get("wall_s"), "stderr_tail": unit.get("stderr_tail"),
                                          "git_commit": _get(unit.get("record"), "git_commit")})
                if env_unit["status"] != "ok" or col_unit["status"] != "ok":
                    side["status"] = f"failed in round {r}: env {env_unit['status']}, collector {col_unit['status']}"
                    log(f"  {tree.label} {case.name}: {side['status']}")
                    continue
                env_rec, col_rec = env_unit["record"], col_unit["record"]
                side["samples"].append(case_metrics(env_rec, col_rec))
                side["backend_diagnostics"] = env_rec.get("backend_diagnostics", "absent in this tree's env bench")
                side["host_sync_sites"] = env_rec.get("host_sync_sites")
                side["num_envs"] = env_rec.get("num_envs")
                side["device"] = env_rec.get("device")
                m = side["samples"][-1]
                log(f"  round {r} {tree.label:4s} {case.name}: env {m['env_steps_per_s_streamed'] or 0:.0f}/s "
                    f"(raw {m['raw_physics_steps_per_s_streamed'] or 0:.0f}/s), collector "
                    f"{m['collector_steps_per_s_no_learning'] or 0:.0f}/s, learning "
                    f"{m['collector_steps_per_s_with_learning'] or 0:.0f}/s")
    for per_tree in results.values():
        for side in per_tree.values():
            side["stats"] = summarize_side(side["samples"])
    return results


SUMMARY_METRICS = ("collector_steps_per_s_no_learning", "collector_steps_per_s_with_learning",
                   "env_steps_per_s_streamed", "raw_physics_steps_per_s_streamed", "env_to_raw_ratio_streamed",
                   "paired_single_step_ratio_drift_control", "update_state_ms", "reset_done_ms",
                   "reset_done_reset_call_ms", "backend_step_ms", "replay_ms", "learner_ms",
                   "python_calls_per_env_step", "redundant_physics_steps_in_reset", "host_syncs_per_env_step",
                   "host_syncs_per_env_step_cuda", "host_syncs_per_collector_step")


def format_summary(record: dict[str, Any]) -> str:
    lines = []
    for name, per_tree in record["cases"].items():
        for label, side in per_tree.items():
            lines.append(f"{name} [{label}]: {side['status']}" + (" (smoke)" if side.get("smoke") else ""))
            for metric in SUMMARY_METRICS:
                st = side.get("stats", {}).get(metric)
                if st:
                    lines.append(f"  {metric:40s} min {st['min']:>11.4g}  median {st['median']:>11.4g}  "
                                 f"max {st['max']:>11.4g}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench matrix", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="cases: " + ", ".join(c.name for c in CASES))
    p.add_argument("--cases", help="comma-separated globs on case names (default: see above)")
    p.add_argument("--device", default=None, help="device of the GPU-backend cases (default: cuda if present)")
    p.add_argument("--num-envs", type=int, default=None, help="default: 4096 on cuda, 64 on cpu")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds, one process per case and side each")
    p.add_argument("--env-steps", type=int, default=None, help="env steps per timed sample (default 200 cuda, 20 cpu)")
    p.add_argument("--env-warmup", type=int, default=None, help="default 50 cuda, 5 cpu")
    p.add_argument("--collector-seconds", type=float, default=None, help="per sample (default 5 cuda, 1 cpu)")
    p.add_argument("--collector-samples", type=int, default=3, help="interleaved pairs inside each process")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds one process may run")
    p.add_argument("--base", metavar="REV", help="also run REV (a temporary git worktree), interleaved and paired")
    p.add_argument("--head", metavar="REV", help="run the head from a worktree of REV too (default: this tree)")
    p.add_argument("--out", type=Path, help="write the JSON record here")
    p.add_argument("--keep-units", type=Path, help="keep every process's JSON here")
    return p


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.rounds < 3:
        p.error("--rounds: at least 3 interleaved samples per case")
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = not device.startswith("cpu")
    settings = Settings(device=device, num_envs=args.num_envs or (4096 if gpu else 64), rounds=args.rounds,
                        env_steps=args.env_steps or (200 if gpu else 20), env_warmup=args.env_warmup or (50 if gpu else 5),
                        collector_seconds=args.collector_seconds or (5.0 if gpu else 1.0),
                        collector_samples=args.collector_samples, timeout_s=args.timeout)
    try:
        cases = select_cases(args.cases, device)
    except ValueError as error:
        p.error(str(error))
    # The head is the working tree as it is, uncommitted edits included (listed in the record),
    # unless --head pins a commit (a tree others commit to moves under a long run).
    workdir = Path(tempfile.mkdtemp(prefix="unilab-matrix-"))
    worktrees: list[Path] = []
    if args.head:
        dirty = []
        head_commit = _git("rev-parse", "--verify", f"{args.head}^{{commit}}")
        worktrees.append(workdir / "head-tree")
        _git("worktree", "add", "--detach", str(worktrees[-1]), head_commit)
        head = Tree("head", worktrees[-1], head_commit)
    else:
        dirty = [line.split(None, 1)[-1] for line in _git("status", "--porcelain", "--untracked-files=no").splitlines()]
        head = Tree("head", ROOT, _git("rev-parse", "HEAD") + ("+uncommitted" if dirty else ""))
    trees, worktree = [head], None
    try:
        if args.base:
            base_commit = _git("rev-parse", "--verify", f"{args.base}^{{commit}}")
            worktree = workdir / "base-tree"
            _git("worktree", "add", "--detach", str(worktree), base_commit)
            worktrees.append(worktree)
            trees = [Tree("base", worktree, base_commit), head]
        print(f"matrix: {len(cases)} cases x {len(trees)} trees x {settings.rounds} rounds on {device}, "
              f"{settings.num_envs} envs")
        results = run_matrix(cases, settings, trees, workdir)
        if args.keep_units:
            args.keep_units.mkdir(parents=True, exist_ok=True)
            for f in workdir.glob("*.json"):
                shutil.copy(f, args.keep_units / f.name)
    finally:
        for tree in worktrees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    record: dict[str, Any] = {
        "benchmark": "unilab_bench.matrix", "command": " ".join(sys.argv),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": asdict(settings),
        "cases_run": [asdict(c) | {"name": c.name} for c in cases],
        "head": {"commit": head.commit, "uncommitted": dirty, "commits_seen": sorted(
            {u["git_commit"] for t in results.values() for u in t["head"]["units"] if u["git_commit"]})}, "base": {"rev": args.base, "commit": trees[0].commit} if args.base else None,
        "machine": machine(), "versions": versions(), "cases": results,
    }
    print(format_summary(record))
    if len(record["head"]["commits_seen"]) > 1:
        print(f"note: the head tree moved during the run ({', '.join(c[:9] for c in record['head']['commits_seen'])}); "
              "pin it with --head REV")
    code = 0
    if args.base:
        base = {n: t["base"] for n, t in results.items()}
        heads = {n: t["head"] for n, t in results.items()}
        record["comparison"] = compare.compare_records(base, heads, paired=True)
        print(compare.format_table(record["comparison"]))
        code = record["comparison"]["exit_code"]
    elif any(t["head"]["status"] != "ok" for t in results.values()):
        code = 2
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
