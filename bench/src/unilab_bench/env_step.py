"""Env-step benchmark: g1_walk_flat (or any owner) next to raw physics of the same scene.

    python -m unilab_bench.env_step --backend mujoco --num-envs 1024 --out bench.json
    python -m unilab_bench.env_step --backend mjwarp --num-envs 4096 --device cuda --out FILE

Method (docs/benchmarks.md): one process, one backend; warm up first (compiles, graph
capture); then ``--samples`` interleaved rounds, each timing ``--steps`` steps of: raw
physics (``backend.step`` alone with the zero policy's ctrl, from the env's current states,
which are restored afterwards), the env with a zero policy, the env with a random policy,
and the ``--compare-task`` owner (by default the same task with unfused reward terms;
``--compare-override`` edits it alone). The device is synchronized before every
clock read. A separate profiled pass gives the per-phase split (CUDA events on GPU) and
a cProfile pass counts Python function calls per env step. Action validation is off, as
a proven runner would run it, so on a backend declaring DEVICE_MASKED_RESET the step path
has no host sync at all (counted two ways: torch's CUDA sync debug mode, and on any device
the aten ops dispatched, via unisim.host_sync).

``--reference tracking`` (a g1_motion_tracking owner) also builds the hand-fused reference
loop of the same MDP (``unilab_bench.reference_tracking``: the backend's public views, no
managers) on its own backend of the same scene and ``num_envs``, and times it streamed in
every round next to raw physics and the env (zero policy for both), with its own kernel-op,
host-sync and Python-call counts; the record adds ``reference`` and the ratios
``env_to_reference_ratio`` and ``reference_to_raw_ratio`` (of medians).

``--gap-rows`` adds raw rows that split the env's gap to raw physics (``unilab_bench.gap_rows``):
raw plus the env's per-step state write, raw plus as many small torch ops as the env dispatches
per step, and raw physics replaying the env's recorded state writes (its physics workload;
``ratio_to_raw_median.env_vs_raw_replaying_env_writes`` is the runtime's own cost on it).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch
from unilab.config_overrides import parse_overrides
from unilab.registry import make_manager_based_rl_env, task_config
from unilab_rl.machine_info import machine, versions
from unisim.factory import check_backend_name
from unisim_bench.arguments import int_at_least

from unilab_bench import gap_rows
from unilab_bench.dispatch_probes import (
    dispatch_profile,
    host_syncs_per_step,
    kernel_ops_by_phase,
    reference_profile,
    reward_kernel_ops,
)
from unilab_bench.matrix_trees import git_commit
from unilab_bench.results.cli import check_target, record_to
from unilab_bench.results.records import command_line, env_record


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_steps(device, steps: int, fn) -> float:
    _sync(device)
    t0 = time.perf_counter()
    for k in range(steps):
        fn(k)
    _sync(device)
    return time.perf_counter() - t0


def _raw_sample(env, steps: int) -> float:
    """Physics alone from the env's current states, then put those states back."""
    backend, device = env.backend, env.device
    views = backend.views()
    qpos, qvel = views.qpos.clone(), views.qvel.clone()
    ctrl = env.action_manager.ctrl.clone()
    seconds = _time_steps(device, steps, lambda k: backend.step(ctrl, env.decimation))
    backend.set_state(torch.arange(env.num_envs, device=device), qpos, qvel)
    env.robot.invalidate()
    return seconds


def _reward_ms(env, reps: int = 50) -> float:
    """Reward manager alone on a frozen state (no physics noise in the figure)."""
    reps_fn = lambda k: env.reward_manager.compute(env)
    return 1e3 * _time_steps(env.device, reps, reps_fn) / reps


def _episodes_ended(env) -> float:
    """Episodes the env has ended since its metrics were last flushed (a host sync: untimed)."""
    return float(env.metric_manager.episodes_ended_so_far())


def _paired_ratio(env, policy, steps: int) -> float:
    """Env step vs raw physics, alternating one of each from the same state, so load drift
    on a shared machine hits both alike: (raw time) / (env time) over ``steps`` pairs."""
    backend, device = env.backend, env.device
    rows = torch.arange(env.num_envs, device=device)
    raw = envt = 0.0
    for k in range(steps):
        views = backend.views()
        qpos, qvel = views.qpos.clone(), views.qvel.clone()
        ctrl = env.action_manager.ctrl.clone()
        # Both steps of a pair start from the state as set_state writes it. Writing a state also
        # clears what the backend carries between steps (mjwarp: the solver's warm start), so the
        # env step after the undo below started cold while the raw step started warm: on warp's
        # CPU device the first substep took 3.0 solver iterations against 1.65.
        backend.set_state(rows, qpos, qvel)  # untimed
        raw += _time_steps(device, 1, lambda _, c=ctrl: backend.step(c, env.decimation))
        backend.set_state(rows, qpos, qvel)  # undo the raw step (untimed)
        env.robot.invalidate()
        envt += _time_steps(device, 1, lambda _, k=k: env.step(policy(k)))
    return raw / envt


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _overrides(args: argparse.Namespace, compare: bool = False) -> list[str]:
    """The env overrides the timed task (or, with ``compare``, the comparison task) is built
    with: what main checks before anything is built is what run builds."""
    return ["validate_actions=false", *args.override, *(args.compare_override if compare else ())]


def run(args: argparse.Namespace) -> dict:
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    options = dict(parse_overrides(args.backend_option))
    overrides = _overrides(args)
    mk = lambda task, compare=False: make_manager_based_rl_env(
        task, backend=args.backend, num_envs=args.num_envs, device=args.device, seed=0,
        overrides=_overrides(args, compare), backend_options=options)
    env = mk(args.task)
    envs = {"env_zero": env, "env_random": env}
    if args.compare_task:
        envs["env_compare"] = mk(args.compare_task, compare=True)
    elif args.compare_override:
        raise SystemExit("--compare-override: applies to --compare-task, which is empty")
    n, device, steps = env.num_envs, env.device, args.steps
    ref = None
    if args.reference == "tracking":
        from unilab_bench.reference_tracking import make_tracking_reference

        try:
            ref = make_tracking_reference(args.task, backend=args.backend, num_envs=args.num_envs, device=args.device,
                                          seed=0, overrides=overrides, backend_options=options)
        except (KeyError, ValueError) as e:
            raise SystemExit(f"--reference tracking: task {args.task!r} is not a g1_motion_tracking owner the "
                             f"reference loop reproduces ({e})") from e
    zeros = torch.zeros(n, env.action_dim, device=device)
    gen = torch.Generator(device=device).manual_seed(1)
    pool = [torch.rand(n, env.action_dim, generator=gen, device=device) * 2 - 1 for _ in range(8)]
    policies = {"env_zero": lambda k: zeros, "env_random": lambda k: pool[k % len(pool)],
                "env_compare": lambda k: zeros}

    for e in set(envs.values()):  # warm-up: compiles, graph capture, caches
        for k in range(args.warmup):
            e.step(zeros)
        _raw_sample(e, 2)
        e.flush_metrics()
    if ref is not None:
        for _ in range(args.warmup):
            ref.step(zeros)

    # The raw rows step physics with the env's last ctrl. The zero policy's ctrl (the warm-up's)
    # is put back before them in every round: the round before ended on the random policy, and
    # raw physics holding a random joint target is not the workload of env_zero, the row the
    # ratios to raw are read for (on mujoco it ran faster than with the zero policy's ctrl).
    zero_ctrl = env.action_manager.ctrl.clone()
    gap_ops = dispatch_profile(env, zeros)["kernel_ops_per_step"] if args.gap_rows else 0
    gap = ["raw_with_state_write", "raw_with_torch_ops", "raw_replaying_env_writes"] if args.gap_rows else []
    rates: dict[str, list[float]] = {k: [] for k in ["raw", *gap, *envs, *(["reference"] if ref is not None else [])]}
    paired: dict[str, list[float]] = {k: [] for k in envs}
    # The replay row replays a window the env ran just before its own timed one (the managers
    # cannot be rewound), so the two windows' workloads match in distribution, not exactly:
    # episodes ended in each window, per sample, show how close they were.
    episodes: dict[str, list[float]] = {k: [] for k in [*(["raw_replaying_env_writes"] if args.gap_rows else []), *envs]}
    # The paired ratio is a drift control: a fifth of the window in synchronized pairs is enough
    # to see drift, and the full window made it most of the run's time on a GPU.
    paired_steps = max(5, steps // 5)
    for _ in range(args.samples):
        env.action_manager.ctrl.copy_(zero_ctrl)  # the next env step writes its own ctrl over it
        rates["raw"].append(n * steps / _raw_sample(env, steps))
        if args.gap_rows:
            rates["raw_with_state_write"].append(n * steps / gap_rows.raw_with_state_write(env, steps, _time_steps))
            rates["raw_with_torch_ops"].append(
                n * steps / gap_rows.raw_with_torch_ops(env, steps, _time_steps, round(gap_ops)))
            before = _episodes_ended(env)
            rates["raw_replaying_env_writes"].append(
                n * steps / gap_rows.raw_replaying_env_writes(env, steps, _time_steps, zeros))
            episodes["raw_replaying_env_writes"].append(_episodes_ended(env) - before)
        for name, e in envs.items():
            policy = policies[name]
            before = _episodes_ended(e)
            rates[name].append(n * steps / _time_steps(device, steps, lambda k, e=e, p=policy: e.step(p(k))))
            episodes[name].append(_episodes_ended(e) - before)
            paired[name].append(_paired_ratio(e, policy, paired_steps))
        if ref is not None:  # streamed like the env: steps back to back, one synchronize at the end
            rates["reference"].append(n * steps / _time_steps(device, steps, lambda k: ref.step(zeros)))
    for e in set(envs.values()):
        e.flush_metrics()

    # Profiled pass: per-phase split (timings only exist with the flag on), and the
    # adapter's own counters (when it publishes them) for redundant physics in resets.
    before = env.backend.diagnostics()
    env.timer.enabled = True
    for k in range(steps):
        env.step(zeros)
    after = env.backend.diagnostics()
    diagnostics = json.loads(json.dumps(after, default=str))  # the backend's own figures, JSON-safe
    counters = {}
    for key in ("physics_steps", "set_state_calls"):
        if isinstance(before.get(key), int) and isinstance(after.get(key), int):
            counters[f"{key}_per_env_step"] = (after[key] - before[key]) / steps
    if "physics_steps_per_env_step" in counters:
        counters["redundant_physics_steps_per_env_step"] = counters["physics_steps_per_env_step"] - env.decimation
    phases = {k.removeprefix("time/"): v for k, v in env.flush_metrics().items() if k.startswith("time/")}
    env.timer.enabled = False
    phases["manager_overhead_ms"] = phases["step_total_ms"] - phases["backend_step_ms"]

    profiler = cProfile.Profile()
    prof_steps = max(5, min(steps, 20))
    profiler.enable()
    for k in range(prof_steps):
        env.step(zeros)
    profiler.disable()
    calls = pstats.Stats(profiler).total_calls / prof_steps
    reset_rows_per_step = env.flush_metrics()["episodes"] / prof_steps
    syncs, sync_sites, sync_steps = host_syncs_per_step(env, zeros)
    dispatch = dispatch_profile(env, zeros)
    ops_by_phase = kernel_ops_by_phase(env, zeros)
    vs_compare = {}
    for name, e in (("env", env), ("compare", envs.get("env_compare"))):
        if e is None:
            continue
        profile = dispatch if e is env else dispatch_profile(e, zeros)
        vs_compare[f"kernel_ops_per_step_{name}"] = profile["kernel_ops_per_step"]
        vs_compare[f"reward_kernel_ops_{name}"] = reward_kernel_ops(e)
        vs_compare[f"reward_compute_ms_{name}"] = min(_reward_ms(e) for _ in range(3))
        e.flush_metrics()

    summary = {name: _stats(v) for name, v in rates.items()}
    raw_median = summary["raw"]["median"]
    ratios = {name: summary[name]["median"] / raw_median for name in [*gap, *envs, *(["reference"] if ref else [])]}
    if "env_compare" in summary:
        ratios["env_vs_compare"] = summary["env_zero"]["median"] / summary["env_compare"]["median"]
    if "raw_replaying_env_writes" in summary:  # the runtime's own cost, with the env's physics workload
        ratios["env_vs_raw_replaying_env_writes"] = (summary["env_zero"]["median"]
                                                     / summary["raw_replaying_env_writes"]["median"])
    record = {
        "benchmark": "unilab_bench.env_step", "task": args.task, "backend": args.backend, "num_envs": n,
        "device": str(device), "data_plane": env.backend.capabilities.data_plane.value,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "comparison_task": args.compare_task or None, "overrides": list(args.override),
        "comparison_overrides": list(args.compare_override),
        "gap_rows_torch_ops_per_step": round(gap_ops) if args.gap_rows else None,
        "gap_rows_solver_iterations": gap_rows.solver_iterations(env, zeros, steps) if args.gap_rows else None,
        "steps_per_sample": steps, "paired_steps_per_sample": paired_steps, "samples": args.samples,
        "warmup": args.warmup,
        "torch_threads": torch.get_num_threads(),
        "env_steps_per_s": summary, "env_steps_per_s_samples": rates, "ratio_to_raw_median": ratios,
        "paired_ratio_to_raw": {k: _stats(v) for k, v in paired.items()},
        "episodes_ended_per_sample": episodes,
        "phases_ms_per_step": phases, "python_calls_per_env_step": calls,
        "backend_step_share_of_env_step": phases["backend_step_ms"] / phases["step_total_ms"],
        "vs_compare": vs_compare, "host_syncs_per_env_step": syncs, "host_sync_sites": sync_sites,
        "host_sync_steps": sync_steps, "dispatch_per_env_step": dispatch,
        "kernel_ops_per_env_step_by_phase": ops_by_phase,
        "backend_counters": counters, "backend_diagnostics": diagnostics,
        "reset_rows_per_step_in_profile": reset_rows_per_step,
        "git_commit": git_commit(), "versions": versions(), "command": " ".join(sys.argv),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(),  # where it ran: a host plane's physics runs on these CPUs
    }
    if ref is not None:
        record["reference"] = {"kind": args.reference, "module": "unilab_bench.reference_tracking",
                               "steps_per_s": summary["reference"], "dispatch_per_step": reference_profile(ref, zeros)}
        record["env_to_reference_ratio"] = summary["env_zero"]["median"] / summary["reference"]["median"]
        record["reference_to_raw_ratio"] = summary["reference"]["median"] / raw_median
        ref.backend.close()
    for e in set(envs.values()):
        e.close()
    return record


def _print(record: dict) -> None:
    s = record["env_steps_per_s"]
    print(f"{record['task']} on {record['backend']} ({record['device']}, {record['num_envs']} envs)")
    for name, st in s.items():
        ratio = record["ratio_to_raw_median"].get(name)
        extra = f"  {ratio:.3f}x raw" if ratio is not None else ""
        print(f"  {name:12s} steps/s min {st['min']:>10.0f} median {st['median']:>10.0f} max {st['max']:>10.0f}{extra}")
    for name, st in record["paired_ratio_to_raw"].items():
        print(f"  paired ratio {name:12s} min {st['min']:.3f} median {st['median']:.3f} max {st['max']:.3f}")
    if "env_vs_raw_replaying_env_writes" in record["ratio_to_raw_median"]:
        print("  env vs raw physics replaying the env's state writes: "
              f"{record['ratio_to_raw_median']['env_vs_raw_replaying_env_writes']:.3f}x")
    for name, ended in record["episodes_ended_per_sample"].items():
        print(f"  episodes ended per timed window, {name}: {', '.join(f'{e:g}' for e in ended)}")
    if "env_vs_compare" in record["ratio_to_raw_median"]:
        print(f"  env vs {record['comparison_task']}: {record['ratio_to_raw_median']['env_vs_compare']:.3f}x")
    print("  phases (ms/step): " + ", ".join(f"{k} {v:.3f}" for k, v in record["phases_ms_per_step"].items()))
    print(f"  backend_step share of the env step (profiled pass): {record['backend_step_share_of_env_step']:.3f}")
    print(f"  python calls per env step: {record['python_calls_per_env_step']:.0f}")
    if record["backend_counters"]:
        print("  backend counters: " + ", ".join(f"{k} {v:.2f}" for k, v in record["backend_counters"].items()))
    if record["host_syncs_per_env_step"] is not None:
        print(f"  host syncs per env step (torch sync debug mode): {record['host_syncs_per_env_step']:.2f}")
        for site, count in record["host_sync_sites"].items():
            print(f"    {count} at {site}")
        if record["host_sync_steps"]:
            print(f"    at steps {record['host_sync_steps']} of the probe")
    print("  dispatch per env step: " + ", ".join(f"{k} {v:.1f}" for k, v in record["dispatch_per_env_step"].items()))
    print("  kernel ops per env step by phase: " + ", ".join(
        f"{k} {v:.1f}" for k, v in record["kernel_ops_per_env_step_by_phase"].items()))
    if "reference" in record:
        print(f"  env/reference {record['env_to_reference_ratio']:.3f}, reference/raw "
              f"{record['reference_to_raw_ratio']:.3f}; reference dispatch per step: "
              + ", ".join(f"{k} {v:.1f}" for k, v in record["reference"]["dispatch_per_step"].items()))
    print("  vs compare task: " + ", ".join(f"{k} {v:.3f}" for k, v in record["vs_compare"].items()))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m unilab_bench.env_step", description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="mujoco")
    p.add_argument("--num-envs", type=int_at_least(1), default=256)
    p.add_argument("--device", default=None)
    p.add_argument("--task", default="g1_walk_flat")
    p.add_argument("--compare-task", default="g1_walk_flat_unfused",
                   help="owner timed beside the task in every round (default: the same task with one reward "
                        "term per component, so the comparison is the fused rewards' gain; '' to skip)")
    p.add_argument("--reference", choices=("tracking",), default=None,
                   help="also time the hand-fused reference loop of the task's MDP (tracking: g1_motion_tracking)")
    p.add_argument("--steps", type=int_at_least(1), default=50, help="env steps per timed sample")
    p.add_argument("--samples", type=int, default=3)
    p.add_argument("--warmup", type=int_at_least(0), default=20)
    p.add_argument("--torch-threads", type=int, default=None,
                   help="torch intra-op threads (default: 1 on cpu, where torch's spinning threads "
                        "would compete with a host physics pool; untouched on cuda)")
    p.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--compare-override", action="append", default=[], metavar="KEY=VALUE",
                   help="applied after --override to --compare-task only (e.g. the same task without "
                        "its contact sensors, to time what sensing costs)")
    p.add_argument("--gap-rows", action="store_true",
                   help="also time raw physics plus the env's per-step state write, plus as many small "
                        "torch ops as the env dispatches, and replaying the env's recorded state writes "
                        "(unilab_bench.gap_rows)")
    p.add_argument("--out", default=None, help="write the JSON record here")
    p.add_argument("--record", type=Path, default=None, metavar="STORE",
                   help="also append a compact record to this results store (e.g. results/records.jsonl)")
    args = p.parse_args(argv)
    if args.samples < 3:
        p.error("--samples: at least 3 interleaved samples")
    if args.torch_threads is None and (args.device is None or str(args.device).startswith("cpu")):
        args.torch_threads = 1
    try:  # the task, its overrides, the backend name and the store, before anything is built
        check_target(args.record)
        check_backend_name(args.backend, argument="--backend")
        parse_overrides(args.backend_option)
        task_config(args.task, _overrides(args))
        if args.compare_task:
            task_config(args.compare_task, _overrides(args, compare=True))
    except ValueError as error:
        p.error(str(error))
    record = run(args)
    _print(record)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")
    record_to(args.record, env_record(record, command=command_line()))
    return record


if __name__ == "__main__":
    main()
