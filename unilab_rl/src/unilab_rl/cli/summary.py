"""What a training run reports at its end: ``summary.json`` and the closing lines."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

from unilab_rl.cli.metrics_sink import shown_metrics, write_json_atomic
from unilab_rl.cli.process_clock import python_writes_bytecode
from unilab_rl.goals import GoalTracker

ONCE = ("updates", "env_steps_per_s")  # of the shown metrics, those the closing line gives in its own form


def write_summary(args: argparse.Namespace, result: Any, tracker: GoalTracker, started: float,
                  startup_s: float, startup_phases: dict[str, float], imports_s: float | None,
                  simulator: dict[str, Any]) -> None:
    from unilab_rl.machine_info import machine  # at the end only: no import on the way to training

    summary = {"task": args.task, "backend": args.backend, "algo": args.algo, "num_envs": args.num_envs,
               "env_steps": result.env_steps, "updates": result.updates, "wall_s": round(result.wall_s, 1),
               "interrupted": result.interrupted,
               # Training seconds until the first updates were issued: the learner's first compiles
               # run there (its graph captures in the next few steps).
               "first_learning_s": None if result.first_learning_s is None else round(result.first_learning_s, 1),
               "startup_s": round(startup_s, 1),  # arguments parsed (imports done) to the first training step
               # Its parts: building the env (the simulator's model, kernels and graphs too), the
               # learner and replay buffer, and the rest (argument and checkpoint checks, run files).
               "startup_phases_s": {k: round(v, 2) for k, v in startup_phases.items()},
               # Process start to the parsed command (Python, torch and the packages imported), so
               # imports_s + startup_s is launch to training; null where the OS gives no start time.
               "imports_s": None if imports_s is None else round(imports_s, 2),
               # False: no cached bytecode, so both of the above include compiling every imported source.
               "writes_bytecode": python_writes_bytecode(),
               "process_wall_s": round(time.perf_counter() - started, 1),  # env build and compiles too
               # Where it ran (start-up and env-steps/s depend on the host's CPU too), read after the
               # clocks above so it costs neither start-up nor training.
               "machine": machine(),
               **tracker.summary(),
               # The simulator's own facts at the end (its keys): step counts, buffer sizes and
               # overflows, so a run can tell whether its physics dropped contacts on the way.
               "simulator": simulator}
    write_json_atomic(args.summary_json or args.out / "summary.json", summary)
    print_summary(result, tracker)
    warn_altered_physics(simulator, args.num_envs)


def warn_altered_physics(simulator: dict[str, Any], num_envs: int, prog: str = "unilab-train",
                         details_in: str = "summary.json") -> None:
    # Said out loud: a world whose contacts were dropped or that was restarted fed the learner
    # (or an evaluation's verdict) steps of a different physics, and a JSON file alone is easy to miss.
    altered = simulator["altered_worlds"]
    if altered:
        print(f"{prog}: warning: the simulator altered the physics of {altered} of {num_envs} worlds "
              "on its own during the run (a full contact or constraint buffer, or an unstable state "
              f"restarted); {details_in}'s simulator entry has the details", file=sys.stderr)


def print_summary(result: Any, tracker: GoalTracker) -> None:
    # Each figure once: the counters from the result, the rate as the median over the run's log
    # intervals (the last interval is partial and often short: its rate is noise).
    parts = [f"env_steps={result.env_steps}", f"updates={result.updates}", f"wall={result.wall_s:.1f}s"]
    if tracker.rates:
        parts.append(f"env_steps_per_s={statistics.median(tracker.rates):.0f} (median of {len(tracker.rates)} "
                     f"log interval{'s' if len(tracker.rates) != 1 else ''})")
    parts += [f"{k}={v:.3f}" for k, v in shown_metrics(tracker.last).items() if k not in ONCE]
    print("unilab-train: " + ("interrupted, " if result.interrupted else "done, ") + " ".join(parts))
    if result.first_learning_s is not None:
        print(f"unilab-train: the first updates were issued {result.first_learning_s:.1f} s into training "
              "(the learner's first compiles run there)")
    if tracker.goals:
        when = tracker.first_met_wall_s
        print(f"unilab-train: goals {', '.join(map(str, tracker.goals))}: "
              + ("met at the end" if tracker.all_met() else "not met at the end")
              + ("" if when is None else f", first met at {when:.1f} s"))
    if result.checkpoint is not None:
        print(f"unilab-train: checkpoint {result.checkpoint}")
