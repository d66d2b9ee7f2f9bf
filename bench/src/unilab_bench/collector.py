"""``unilab-bench learner`` (unilab_bench.learner) times a learner's draws and updates.

``unilab-bench collector``: collector env-steps/s without and with learning (and, on a CUDA
device, with learning beside collection: ``overlap_learning``), each also as a fraction of the
env alone timed in the same rounds: stepped with zero actions, and replaying the policy's own
actions from the replay buffer (open loop: the same actions, not the same trajectory).

Method (docs/benchmarks.md): same process, env and num_envs for both modes; warm up first
(replay filled past one batch, kernels compiled, a few updates); then ``--samples``
interleaved rounds (env alone twice, no-learn, learn; plus learn overlapped on CUDA) of ``--seconds`` each, device synchronized before every
clock read; min/median/max reported and written as a JSON record with the command, commit,
versions and device.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from unilab_rl.algorithms import build_agent, lookup
from unilab_rl.cli.overrides import env_namespace, split_overrides, validated
from unilab_rl.cli.presets import PRESETS, given_fields, lookup_preset
from unilab_rl.cli.run_dir import check_file_target
from unilab_rl.cli.run_record import git_commit
from unilab_rl.contract import EnvFactory, EnvSpec
from unilab_rl.machine_info import machine  # where a run ran, as every run summary records it
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig
from unilab_rl.threads import apply_thread_policy

from unilab_bench.results.cli import check_target, record_to
from unilab_bench.results.records import collector_record, command_line
from unilab_bench.stats import summarize, synchronize


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-bench", description="Benchmarks of the training stack.")
    sub = parser.add_subparsers(dest="what", required=True)
    for name, what in (("env", "Manager env step vs raw physics (python -m unilab_bench.env_step --help)"),
                       ("backend", "mjwarp/genesis adapter vs raw (python -m unisim_bench.backend --help)"),
                       ("backend-host", "mujoco adapter vs raw rollout (python -m unisim_bench.mujoco_host --help)"),
                       ("matrix", "the minimum matrix of collector cases, optionally paired against --base REV "
                                  "(unilab-bench matrix --help)"),
                       ("compare", "classify a head record against a base by the staged budget "
                                   "(unilab-bench compare --help)"),
                       ("results", "the results store: add a record, regenerate or check the docs' tables "
                                   "(unilab-bench results --help)")):
        sub.add_parser(name, help=what, add_help=False)
    collector = sub.add_parser("collector", help="collector env-steps/s with and without learning")
    collector.add_argument("--seconds", type=float, default=5.0, help="length of each timed sample")
    collector.add_argument("--record", type=Path, metavar="STORE",
                           help="also append a compact record to this results store (e.g. results/records.jsonl)")
    collector.add_argument("--env-priorities", type=_priorities, default=None, metavar="P,...",
                           help="CUDA: time learning beside collection once per priority of the stream collection "
                                "runs on, in each sample round (e.g. 0,-5; 0 is the caller's stream); the first "
                                "is the record's headline figure (default: runner.env_stream_priority)")
    learner = sub.add_parser("learner", help="a learner's time per replay draw and per update, host "
                                             "and device")
    learner.add_argument("--calls", type=int, default=100, help="calls back to back in each timed sample")
    for command in (collector, learner):
        command.add_argument("--task", default="g1_walk_flat",
                             help="registered task or package.module:task_name (the module is imported)")
        command.add_argument("--backend", default="mujoco")
        command.add_argument("--algo", default="flashsac")
        command.add_argument("--num-envs", type=int, default=64)
        command.add_argument("--device", default=None)
        command.add_argument("--samples", type=int, default=3)
        command.add_argument("--json", type=Path, help="write the JSON record here")
        command.add_argument("--preset", choices=sorted(PRESETS),
                             help="start from the learner settings this training preset trains the algorithm with "
                                  "(not its env or runner settings)")
        command.add_argument("overrides", nargs="*", metavar="key=value")
    return parser


def _priorities(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    # Distinct: each priority's samples go to one list, so a repeat would be timed twice a round into it.
    if not values or any(v > 0 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"expected distinct comma-separated integers <= 0 (lower is a higher "
                                         f"priority), got {text!r}")
    return values


def _streamed_rate(runner: OffPolicyRunner, seconds: float, ten_steps: Callable[[], None]) -> float:
    """Env-steps/s of ``ten_steps`` (ten vectorized steps, issued back to back) repeated until
    ``seconds`` have passed; the device is synchronized before every clock read."""
    device = runner.spec.device
    synchronize(device)
    start = time.perf_counter()
    steps = 0
    while True:
        ten_steps()
        steps += 10
        synchronize(device)
        if time.perf_counter() - start >= seconds:
            break
    return steps * runner.spec.num_envs / (time.perf_counter() - start)


def timed_rate(runner: OffPolicyRunner, seconds: float, learn: bool) -> float:
    """The collector's env-steps/s, with the updates each step earns or without learning."""
    def ten_steps() -> None:
        for _ in range(10):
            runner.collect_and_learn(learn)

    return _streamed_rate(runner, seconds, ten_steps)


def timed_env_alone_rate(runner: OffPolicyRunner, seconds: float, actions: str) -> float:
    """The env stepped and nothing else, on the collector's env in its process. ``actions``:
    "zero" (the env benchmark's zero policy) or "replayed": the actions the policy took, as the
    replay buffer holds them, in order, open loop from the states the env is in: the physics gets
    the policy's kind of actions (a robot that flails makes more contacts and falls, and its
    physics costs more than a standing one's) without the policy, the replay or the learner. Not
    the collector's trajectory itself: the same actions from other states lead elsewhere."""
    spec = runner.spec
    if actions == "zero":
        sequence = [torch.zeros(spec.num_envs, spec.action_dim, device=spec.device)]
    else:
        sequence = runner.replay.stored_actions()
    taken = 0

    def ten_steps() -> None:
        nonlocal taken
        runner.collector.step_env_only([sequence[(taken + k) % len(sequence)] for k in range(10)])
        taken += 10

    return _streamed_rate(runner, seconds, ten_steps)


def check_arguments(args: argparse.Namespace) -> None:
    """Bad numbers fail before anything is built (ValueError naming the flag): the arguments
    the collector and learner benchmarks share, and each one's own sample length."""
    if args.what == "collector" and not (math.isfinite(args.seconds) and args.seconds > 0):
        raise ValueError(f"--seconds must be a finite number > 0, got {args.seconds}")
    if args.what == "learner" and args.calls < 1:
        raise ValueError(f"--calls must be >= 1, got {args.calls}")
    if args.samples < 1:
        raise ValueError(f"--samples must be >= 1, got {args.samples}")
    if args.num_envs < 1:
        raise ValueError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.json is not None:  # before the benchmark runs, not after
        check_file_target(args.json, "--json")
    if args.what == "collector":
        check_target(args.record)


def bench_runner(args: argparse.Namespace, factory: EnvFactory):
    """The env, its spec, the algorithm's config and a runner whose replay holds one batch, as
    the benchmarks time them: ``--preset`` overrides first, the command line's win, learning
    from the first step. The caller closes the env."""
    algorithm = lookup(args.algo)
    split = split_overrides(args.overrides, algorithm.config_class, RunnerConfig, env_namespace(args.task))
    tuned = given_fields(lookup_preset(args.preset).entry_for(args.algo).algo) if args.preset else {}
    # Learning starts after one batch (the preset's learning_starts included) so the "learn"
    # mode is learning from its first sample; the command line still wins.
    config = validated(algorithm.config_class, {**tuned, "learning_starts": 0}, split.algo, "algorithm")
    runner_config = validated(RunnerConfig, {"timing_sample_every": 1_000_000}, split.runner, "runner")
    config.check_replay_holds_a_start(args.num_envs)  # else the fill below would never end
    env = factory(args.task, backend=args.backend, num_envs=args.num_envs, device=args.device, seed=0,
                  overrides=split.env)
    try:
        spec = EnvSpec.from_env(env)
        apply_thread_policy(spec.device, None)
        agent = build_agent(args.algo, spec, config, spec.device)
        runner = OffPolicyRunner(env, agent, config, RunIdentity(args.task, args.backend, args.algo, 0), None,
                                 runner_config=runner_config)
        while len(runner.replay) < config.batch_size:
            runner.collector.step()
    except BaseException:
        env.close()
        raise
    return env, spec, config, runner


def bench_collector(args: argparse.Namespace, factory: EnvFactory) -> dict[str, Any]:
    check_arguments(args)
    env, spec, config, runner = bench_runner(args, factory)
    try:
        timed_rate(runner, min(args.seconds, 2.0), learn=True)  # warm-up: compiles, first updates
        # Learning beside collection (the learner on its own CUDA stream) is a third mode where a
        # CUDA device allows it; it is switched on and off between samples on the same runner.
        # With --env-priorities it is timed once per priority of the stream collection runs on.
        overlap = spec.device.type == "cuda"
        priorities = args.env_priorities or [runner.config.env_stream_priority]
        by_priority: dict[int, list[float]] = {p: [] for p in priorities}

        def overlapped_rate(priority: int, seconds: float) -> float:
            runner.config.env_stream_priority = priority
            runner.set_overlap_learning(True)
            rate = timed_rate(runner, seconds, learn=True)
            runner.set_overlap_learning(False)
            return rate

        if overlap:
            for priority in priorities:
                overlapped_rate(priority, min(args.seconds, 1.0))
        env_alone, env_replayed, no_learn, learn = [], [], [], []
        for _ in range(args.samples):
            env_alone.append(timed_env_alone_rate(runner, args.seconds, "zero"))
            env_replayed.append(timed_env_alone_rate(runner, args.seconds, "replayed"))
            no_learn.append(timed_rate(runner, args.seconds, learn=False))
            learn.append(timed_rate(runner, args.seconds, learn=True))
            if overlap:
                for priority in priorities:
                    by_priority[priority].append(overlapped_rate(priority, args.seconds))
        learn_overlapped = by_priority[priorities[0]]
        runner.config.env_stream_priority = priorities[0]  # the headline's, not the last one timed
        # Phase breakdown in a separate sample, learning after each step so that the phases run
        # one after another and add up to the step (beside collection they overlap).
        runner.timer.sample_every = 1
        runner.timer.flush()
        timed_rate(runner, args.seconds, learn=True)
        phases_ms = runner.timer.flush()
        phases_ms.update({f"env/{k}": v for k, v in env.flush_metrics().items() if k.endswith("_ms")})
        runner.timer.sample_every = 1_000_000
        # Counted last: compiled networks run eagerly after the probe (bench_learner._counted).
        dispatch = collector_dispatch(runner)
    finally:
        env.close()
    modes = (("no_learning", no_learn), ("with_learning", learn), ("with_learning_overlapped", learn_overlapped))
    record = {
        "benchmark": "collector", "command": " ".join(sys.argv), "task": args.task, "backend": args.backend,
        "algo": args.algo, "num_envs": args.num_envs, "device": str(spec.device), "device_name": _device_name(spec.device),
        "samples": args.samples, "seconds_per_sample": args.seconds, "algo_config": config.model_dump(),
        "env_steps_per_s_no_learning": summarize(no_learn), "env_steps_per_s_with_learning": summarize(learn),
        "learning_cost_ratio": statistics.median(learn) / statistics.median(no_learn),
        # None where the device has no CUDA streams to overlap on.
        "env_steps_per_s_with_learning_overlapped": summarize(learn_overlapped) if overlap else None,
        "overlapped_learning_cost_ratio": (statistics.median(learn_overlapped) / statistics.median(no_learn)
                                           if overlap else None),
        # Each mode over the env alone of its own round (the same env, process and machine state),
        # stepped with zero actions and with the policy's own actions replayed.
        "env_steps_per_s_env_alone": summarize(env_alone),
        "env_steps_per_s_env_alone_replaying_actions": summarize(env_replayed),
        **{f"of_env_alone{suffix}": {mode: summarize([c / e for c, e in zip(rates, alone, strict=True)])
                                     for mode, rates in modes if rates}
           for suffix, alone in (("", env_alone), ("_replaying_actions", env_replayed))},
        "env_stream_priorities": priorities,
        "env_steps_per_s_with_learning_overlapped_by_env_priority": (
            {str(p): summarize(rates) for p, rates in by_priority.items()} if overlap else None),
        "phase_ms_with_learning": phases_ms, "dispatch_per_collector_step": dispatch, "git_commit": git_commit(), "versions": {"python": platform.python_version(), "torch": torch.__version__},
        "machine": machine(),
        "raw": {"env_alone": env_alone, "env_alone_replaying_actions": env_replayed, "no_learning": no_learn, "with_learning": learn, "with_learning_overlapped": learn_overlapped,
                "with_learning_overlapped_by_env_priority": {str(p): r for p, r in by_priority.items()}},
    }
    return record


def collector_dispatch(runner: OffPolicyRunner, steps: int = 10) -> dict[str, float]:
    """Host syncs and kernel-sized torch ops per collector step (policy, env, replay),
    counted from what torch dispatches (unisim.host_sync). A HOST_BRIDGE backend's own
    syncs are included: its physics runs on the host by design."""
    from unisim.host_sync import HostSyncProbe

    with HostSyncProbe() as probe:
        for _ in range(steps):
            runner.collector.step()
    return {"host_syncs_per_collector_step": len(probe.syncs) / steps,
            "kernel_ops_per_collector_step": probe.kernel_op_count / steps}


def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"


def main(argv: list[str] | None = None, factory: EnvFactory | None = None) -> int:
    """``collector`` and ``learner``; the other benchmarks are dispatched by unilab_bench.cli."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    try:
        if factory is None:
            from unilab_rl.cli.train import default_env_factory

            factory, _ = default_env_factory()  # the env exactly as unilab-train builds it
        if args.what == "learner":
            return _learner(args, factory)
        record = bench_collector(args, factory)
    except (ValueError, KeyError) as error:
        print(f"unilab-bench: error: {error}", file=sys.stderr)
        return 2
    for mode in ("env_alone", "env_alone_replaying_actions", "no_learning", "with_learning",
                 "with_learning_overlapped"):
        stats = record[f"env_steps_per_s_{mode}"]
        if stats is not None:  # the overlapped mode needs CUDA
            of = [record[f"of_env_alone{s}"].get(mode) for s in ("", "_replaying_actions")]
            print(f"collector {mode:27s} env-steps/s  min {stats['min']:10.0f}  median {stats['median']:10.0f}  "
                  f"max {stats['max']:10.0f}" + (f"  of the env alone {of[0]['median']:.3f} (zero actions), "
                                                 f"{of[1]['median']:.3f} (its actions replayed)" if of[0] else ""))
    print(f"with/without learning (median): {record['learning_cost_ratio']:.3f}")
    if record["overlapped_learning_cost_ratio"] is not None:
        print(f"with learning beside collection / without (median): {record['overlapped_learning_cost_ratio']:.3f}")
        by_priority = record["env_steps_per_s_with_learning_overlapped_by_env_priority"]
        if len(by_priority) > 1:
            print("beside collection by env stream priority (median env-steps/s): " + ", ".join(
                f"{priority}: {stats['median']:.0f}" for priority, stats in by_priority.items()))
    print("dispatch per collector step: " + ", ".join(
        f"{k} {v:.1f}" for k, v in record["dispatch_per_collector_step"].items()))
    print("phases (ms per env step, learning): " + " ".join(
        f"{k}={v:.2f}" for k, v in record["phase_ms_with_learning"].items()))
    _write_record(args.json, record)
    record_to(args.record, collector_record(record, command=command_line()))
    return 0


def _learner(args: argparse.Namespace, factory: EnvFactory) -> int:
    from unilab_bench.learner import bench_learner, print_learner_record

    check_arguments(args)
    env, _, config, runner = bench_runner(args, factory)
    try:
        record = bench_learner(args, runner, config)
    finally:
        env.close()
    print_learner_record(record)
    _write_record(args.json, record)
    return 0


def _write_record(path: Path | None, record: dict[str, Any]) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    sys.exit(main())
