"""The minimum performance matrix: each case a collector (policy + env + replay insert, with and
without learning) next to the env alone (streamed) and raw physics of the same scene.

    unilab-bench matrix                                  # cpu machine: the mujoco CPU profile cases
    unilab-bench matrix --device cuda --num-envs 4096    # every case
    unilab-bench matrix --cases '*/g1_walk_flat/*' --base HEAD~3 --out run.json

A case is ``algo/task/backend``. Each case is measured by the per-case runners every tree has,
one process per run, which write JSON: ``python -m unilab_bench.env_step`` (env streamed vs raw
physics, paired drift control, phases, cProfile calls, host syncs, backend counters and
diagnostics) and ``python -m unilab_bench.cli collector`` (collector steps/s with and
without learning, policy/env/replay/learner ms, host syncs per collector step). The env
figures of one task/backend are shared by the cases of both algorithms.

``--rounds`` (>= 3) rounds interleave every process: in each round each case runs once per
side. With ``--base REV`` the base side runs from a temporary ``git worktree`` of REV with
that tree's own code (PYTHONPATH to its unisim-core/src, unilab/src, unilab_rl/src), in
ABBA order, so every comparison is paired per round on the same machine; the record is then
classified by the staged budget (unilab_bench.compare) and the exit code is compare's. A
base needs ``unilab_bench.env_step`` (``--out``) and ``unilab-bench collector`` (``--json``);
a case whose task or runner the base lacks is recorded as "case absent in base". ``--base-tree
DIR`` runs a copy of the base's sources instead, where there is no git to make a worktree.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from unilab_rl.machine_info import machine, versions
from unisim_bench.arguments import int_at_least, positive_seconds

from unilab_bench import compare
from unilab_bench.matrix_figures import case_metrics, format_summary, summarize_side
from unilab_bench.matrix_trees import ROOT, Tree, copied_tree, git, working_tree_state
from unilab_bench.matrix_units import prepare_units, reuse_or_run
from unilab_bench.results.cli import check_target, record_to
from unilab_bench.results.records import command_line, matrix_record

# Learner sizes for the CPU profile: the GPU presets' networks take seconds per update on a core.
CPU_LEARNER = ("batch_size=128", "updates_per_step=1", "actor_width=64", "critic_width=64",
               "replay_capacity_per_env=64")


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


# On a GPU each case learns as its task's training preset trains the algorithm (the learner
# settings only; a small replay buffer): the figures are what that training sees.
GPU_PRESET_BY_TASK = {"g1_motion_tracking": "gpu_track"}
DEFAULT_GPU_PRESET = "gpu_walk"
GPU_REPLAY = ("replay_capacity_per_env=64",)


def learner_options(case: Case, device: str) -> tuple[str, ...]:
    """The collector's learner settings for a case on a device."""
    if device.startswith("cpu"):
        return CPU_LEARNER
    return ("--preset", GPU_PRESET_BY_TASK.get(case.task, DEFAULT_GPU_PRESET), *GPU_REPLAY)


def select_cases(patterns: str | None, device: str) -> list[Case]:
    """``--cases`` globs (comma-separated) on case names; by default every case on a GPU
    device and the mujoco CPU profile cases on a CPU-only machine."""
    if not patterns:
        return [c for c in CASES if c.cpu_profile or not device.startswith("cpu")]
    chosen = [c for c in CASES if any(fnmatch.fnmatchcase(c.name, p.strip()) for p in patterns.split(","))]
    if not chosen:
        raise ValueError(f"--cases {patterns!r} matches no case; cases: {', '.join(c.name for c in CASES)}")
    return chosen


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
    gap_rows: bool = False  # the env processes also time env_step's gap rows (raw physics + one extra each)

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
    extra += ["--gap-rows"] if s.gap_rows else []
    return [sys.executable, "-m", "unilab_bench.env_step", "--backend", case.backend, "--task", case.task,
            "--num-envs", str(s.num_envs), "--device", device, compare_flag, "", "--steps", str(steps),
            "--samples", "3", "--warmup", str(s.env_warmup), "--out", str(out), *extra]


def collector_command(case: Case, s: Settings, out: Path, module: str = "unilab_bench.cli") -> list[str]:
    """``module``: the tree's collector benchmark entry (its probe says which)."""
    device, _, seconds = s.for_case(case)
    learner = learner_options(case, device)
    return [sys.executable, "-m", module, "collector", "--task", case.task, "--backend", case.backend,
            "--algo", case.algo, "--num-envs", str(s.num_envs), "--device", device, "--seconds", str(seconds),
            "--samples", str(s.collector_samples), "--json", str(out), *learner]


# ---- the driver -------------------------------------------------------------------------
def _side(status: str, smoke: bool) -> dict[str, Any]:
    return {"status": status, "smoke": smoke, "samples": [], "units": []}


def run_matrix(cases: list[Case], settings: Settings, trees: list[Tree], workdir: Path,
               log=print, on_round=None) -> dict[str, dict[str, Any]]:
    """Every round: each case once per tree (ABBA order between rounds); a smoke case runs in
    the first round only (its counts are gated, its throughput is not, so more rounds buy
    nothing). Returns {case name: {tree label: side}}; a side holds the per-round figures and
    its status. ``on_round(results, rounds_done)`` sees the figures after every round."""
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
            if case.smoke and r > 0:
                continue
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
                    env_cache[env_key] = reuse_or_run(tree, cmd, out, settings.timeout_s)
                env_unit = env_cache[env_key]
                out = workdir / f"{tree.label}-r{r}-collector-{case.algo}-{case.task}-{case.backend}.json"
                cmd = collector_command(case, settings, out, capabilities[tree.label]["collector"])
                col_unit = reuse_or_run(tree, cmd, out, settings.timeout_s)
                for kind, unit in (("env", env_unit), ("collector", col_unit)):
                    side["units"].append({"round": r, "kind": kind, "status": unit["status"],
                                          "wall_s": unit.get("wall_s"), "reused": unit.get("reused", False),
                                          "stderr_tail": unit.get("stderr_tail"),
                                          "git_commit": (unit.get("record") or {}).get("git_commit")})
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
        _summarize(results)
        if on_round is not None:
            on_round(results, r + 1)
    return results


def _summarize(results: dict[str, dict[str, Any]]) -> None:
    for per_tree in results.values():
        for side in per_tree.values():
            side["stats"] = summarize_side(side["samples"])


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench matrix", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="cases: " + ", ".join(c.name for c in CASES))
    p.add_argument("--cases", help="comma-separated globs on case names (default: see above)")
    p.add_argument("--device", default=None, help="device of the GPU-backend cases (default: cuda if present)")
    p.add_argument("--num-envs", type=int_at_least(1), default=None, help="default: 4096 on cuda, 64 on cpu")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds, one process per case and side each")
    p.add_argument("--env-steps", type=int_at_least(1), default=None, help="env steps per timed sample (default 200 cuda, 20 cpu)")
    p.add_argument("--env-warmup", type=int_at_least(0), default=None, help="default 50 cuda, 5 cpu")
    # 2 s on cuda: each sample times three collector modes; at 2 s round 0 of the mjwarp cases took
    # about 7 minutes on an H200, cold kernel and compile caches included.
    p.add_argument("--collector-seconds", type=positive_seconds, default=None, help="per sample (default 2 cuda, 1 cpu)")
    p.add_argument("--collector-samples", type=int_at_least(1), default=3, help="interleaved pairs inside each process")
    p.add_argument("--timeout", type=positive_seconds, default=1200.0, help="seconds one process may run")
    p.add_argument("--gap-rows", action="store_true", help="env processes also time env_step's gap rows, "
                   "among them raw physics replaying the env's own state writes (env_to_replay_ratio_streamed)")
    p.add_argument("--base", metavar="REV", help="also run REV (a temporary git worktree), interleaved and paired")
    p.add_argument("--base-tree", metavar="DIR", type=Path, help="like --base, for a copy of the base's sources "
                   "in DIR (a machine without git): the packages' src folders and workspace.toml; its commit is "
                   "recorded where DIR is a checkout")
    p.add_argument("--head", metavar="REV", help="run the head from a worktree of REV too (default: this tree)")
    p.add_argument("--out", type=Path, help="write the JSON record here")
    p.add_argument("--record", type=Path, metavar="STORE",
                   help="also append a compact record to this results store (e.g. results/records.jsonl)")
    p.add_argument("--units", type=Path, help="keep every process's JSON here; run again with the same folder "
                   "to resume a run cut short (records there are reused, not re-measured; records made with other "
                   "settings, at another commit of their tree or on another machine are refused)")
    return p


def _given_or(value: Any, default: Any) -> Any:
    """A flag's value, or ``default`` where it was not given (0 is a value: ``--env-warmup 0``)."""
    return default if value is None else value


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    if args.rounds < 3:
        p.error("--rounds: at least 3 interleaved samples per case")
    try:
        check_target(args.record)
    except ValueError as error:
        p.error(str(error))
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = not device.startswith("cpu")
    settings = Settings(device=device, num_envs=_given_or(args.num_envs, 4096 if gpu else 64), rounds=args.rounds,
                        env_steps=_given_or(args.env_steps, 200 if gpu else 20),
                        env_warmup=_given_or(args.env_warmup, 50 if gpu else 5),
                        collector_seconds=_given_or(args.collector_seconds, 2.0 if gpu else 1.0),
                        collector_samples=args.collector_samples, timeout_s=args.timeout, gap_rows=args.gap_rows)
    if args.base and args.base_tree:
        p.error("--base and --base-tree: give one base")
    try:
        cases = select_cases(args.cases, device)
        base_tree = copied_tree("base", args.base_tree) if args.base_tree else None
    except ValueError as error:
        p.error(str(error))
    # The head is the working tree as it is, uncommitted edits included (listed in the record),
    # unless --head pins a commit (a tree others commit to moves under a long run).
    workdir = Path(tempfile.mkdtemp(prefix="unilab-matrix-"))
    try:
        units = prepare_units(args.units, workdir)
    except ValueError as error:
        shutil.rmtree(workdir, ignore_errors=True)
        p.error(str(error))
    worktrees: list[Path] = []
    if args.head:
        dirty = []
        head_commit = git("rev-parse", "--verify", f"{args.head}^{{commit}}")
        worktrees.append(workdir / "head-tree")
        git("worktree", "add", "--detach", str(worktrees[-1]), head_commit)
        head = Tree("head", worktrees[-1], head_commit)
    else:
        dirty, head_commit = working_tree_state()
        head = Tree("head", ROOT, head_commit)
    trees = [head]

    def build_record(results: dict[str, dict[str, Any]], rounds_done: int) -> dict[str, Any]:
        return {
            "benchmark": "unilab_bench.matrix", "command": " ".join(sys.argv),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": asdict(settings),
            "rounds_done": rounds_done, "complete": rounds_done == settings.rounds,
            "cases_run": [asdict(c) | {"name": c.name} for c in cases],
            "head": {"commit": head.commit, "uncommitted": dirty, "commits_seen": sorted(
                {u["git_commit"] for t in results.values() for u in t["head"]["units"] if u["git_commit"]})},
            "base": {"rev": args.base, "tree": str(args.base_tree) if base_tree else None,
                     "commit": trees[0].commit} if len(trees) > 1 else None,
            "units": str(args.units) if args.units else None,
            "machine": machine(), "versions": versions(), "cases": results,
        }

    def write_partial(results: dict[str, dict[str, Any]], rounds_done: int) -> None:
        # A run cut short (a lease ending, a killed process) still leaves the rounds it finished.
        if args.out and rounds_done < settings.rounds:
            write_record(args.out, build_record(results, rounds_done))

    try:
        if args.base:
            base_commit = git("rev-parse", "--verify", f"{args.base}^{{commit}}")
            worktrees.append(workdir / "base-tree")
            git("worktree", "add", "--detach", str(worktrees[-1]), base_commit)
            trees = [Tree("base", worktrees[-1], base_commit), head]
        elif base_tree:
            trees = [base_tree, head]
        print(f"matrix: {len(cases)} cases x {len(trees)} trees x {settings.rounds} rounds on {device}, "
              f"{settings.num_envs} envs")
        try:
            results = run_matrix(cases, settings, trees, units, on_round=write_partial)
        except ValueError as error:  # a units folder that does not fit this run
            p.error(str(error))
    finally:
        for tree in worktrees:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    record = build_record(results, settings.rounds)
    print(format_summary(record))
    if len(record["head"]["commits_seen"]) > 1:
        print(f"note: the head tree moved during the run ({', '.join(c[:9] for c in record['head']['commits_seen'])}); "
              "pin it with --head REV")
    code = 0
    if len(trees) > 1:
        base = {n: t["base"] for n, t in results.items()}
        heads = {n: t["head"] for n, t in results.items()}
        record["comparison"] = compare.compare_records(base, heads, paired=True)
        print(compare.format_table(record["comparison"]))
        code = record["comparison"]["exit_code"]
    elif any(t["head"]["status"] != "ok" for t in results.values()):
        code = 2
    if args.out:
        write_record(args.out, record)
    record_to(args.record, matrix_record(record, command=command_line()))
    return code


def write_record(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
