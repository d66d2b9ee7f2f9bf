"""What ``unilab-train`` resolves and checks before it builds anything: the run's plan.

Unset values are filled from the checkpoint (``--resume``), the run record (``--config``), the
preset and the defaults, in that order of precedence below the command line; then everything
that can be checked without an env is (numbers, the task, goals, the algorithm, runner and
env overrides, what a resume may change, the run directory). Nothing is created here, so a
bad command fails before a rank starts or a directory is claimed.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from unilab_rl import distributed
from unilab_rl.algorithms import lookup
from unilab_rl.checkpoint import check_same_task, load_checkpoint
from unilab_rl.cli.overrides import env_namespace, split_overrides, validated
from unilab_rl.cli.run_dir import RunDirError, check_file_target, check_run_dir
from unilab_rl.cli.run_record import apply_run_record, load_run_record
from unilab_rl.cli.train_args import FLAGS, UsageError, apply_preset
from unilab_rl.cli.trained_env import check_task
from unilab_rl.goals import Goal, GoalError
from unilab_rl.runner_config import RunnerConfig

SEED_MAX = 2**62  # torch and the env RNG take 64-bit seeds; ranks add their index
MAX_TORCH_THREADS = os.cpu_count() or 1
# A resumed run takes these from its checkpoint unless the command line gives them.
FROM_CHECKPOINT = ("task", "backend", "algo", "seed")


def prepare(args: argparse.Namespace, tasks: list[str], check_out: bool = True,
            backends: list[str] | None = None) -> dict[str, Any]:
    """Fill unset values (checkpoint, run record, preset, defaults), then validate everything
    that can be validated without building the env; reads only (nothing is created, --out
    included). ``backends``, when known, are the simulator backends ``--backend`` may name."""
    record = None
    if args.config is not None:
        if args.preset is not None:
            raise UsageError("--preset with --config: the run record already holds its preset's resolved values")
        record = load_run_record(args.config)
    document = None
    if args.resume is not None:
        document = load_checkpoint(args.resume)
        for key in FROM_CHECKPOINT:  # --resume continues the checkpoint's run
            if getattr(args, key) is None:
                setattr(args, key, document[key])
        if args.num_envs is None:
            args.num_envs = int(document["spec"]["num_envs"])
    bases: dict[str, dict[str, Any]] = {"algo": {}, "runner": {}, "env": {}}
    if record is not None:
        bases = apply_run_record(args, record)
    apply_preset(args)
    if args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.steps is not None and args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if args.minutes is not None and not (math.isfinite(args.minutes) and args.minutes > 0):
        raise UsageError(f"--minutes must be a finite number > 0, got {args.minutes}")
    if not 0 <= args.seed <= SEED_MAX:
        raise UsageError(f"--seed must be an integer in [0, 2**62], got {args.seed}")
    if args.torch_threads is not None and not 1 <= args.torch_threads <= MAX_TORCH_THREADS:
        # More threads than CPUs buys nothing, and far more makes the OpenMP runtime crash
        # creating them, so the bound is checked here, before any work.
        raise UsageError(f"--torch-threads must be in [1, {MAX_TORCH_THREADS}] (this machine's CPUs), "
                         f"got {args.torch_threads}")
    if args.overwrite and args.resume is not None and args.resume.resolve().parent == args.out.resolve():
        raise UsageError(f"--overwrite would delete {args.resume}, the checkpoint --resume continues from")
    try:
        check_task(args.task, tasks)
    except ValueError as error:  # unknown name; module:task whose module or task is missing
        raise UsageError(str(error)) from None
    if backends is not None and args.backend not in backends:
        raise UsageError(f"--backend: unknown backend {args.backend!r}; valid: {', '.join(backends)}")
    try:
        goals = [Goal.parse(text) for text in args.goal]
    except GoalError as error:
        raise UsageError(str(error)) from None
    algorithm = lookup(args.algo)
    split = split_overrides(args.overrides, algorithm.config_class, RunnerConfig, env_namespace(args.task), FLAGS)
    base_algo: dict[str, Any] = bases["algo"]
    env_overrides = {**bases["env"], **split.env}
    if document is not None:
        check_same_task(document, args.task, args.resume)
        if document["algo"] != args.algo:
            raise UsageError(f"checkpoint {args.resume} was trained with --algo {document['algo']}, not {args.algo}")
        base_algo = dict(document["algo_config"])
        env_overrides = {**bases["env"], **document["env_overrides"], **split.env}
    algo_config = validated(algorithm.config_class, base_algo, split.algo, "algorithm")
    if document is not None:
        check_resume_overrides(algo_config, document["algo_config"], split.algo, args.resume)
    try:
        algo_config.check_replay_holds_a_start(args.num_envs)
    except ValueError as error:
        raise UsageError(f"--num-envs {args.num_envs}: {error}") from None
    runner_config = validated(RunnerConfig, bases["runner"], split.runner, "runner")
    if runner_config.overlap_learning and (args.nproc > 1 or distributed.rank_from_environment() is not None):
        raise UsageError("overlap_learning=true runs in one process only: its learner stream has not been checked "
                         "with the data-parallel gradient all-reduce; pass overlap_learning=false or drop --nproc")
    if check_out:  # data-parallel ranks other than 0 write nothing
        try:
            check_run_dir(args.out, args.resume, args.overwrite)
            if args.curve_json is not None and args.curve_json == args.summary_json:
                raise RunDirError(f"--curve-json and --summary-json are both {args.curve_json}; give two files")
            for flag, path in (("--curve-json", args.curve_json), ("--summary-json", args.summary_json)):
                if path is not None:
                    check_file_target(path, flag, out=args.out)
        except RunDirError as error:
            raise UsageError(str(error)) from None
    return {"algo_config": algo_config, "runner_config": runner_config, "env_overrides": env_overrides,
            "document": document, "goals": goals, "record": record}


def check_resume_overrides(config: Any, trained: dict[str, Any], overrides: dict[str, str], path: Path) -> None:
    """A resume override takes effect or is refused: refuse a change to a field the
    checkpoint's state fixes (network shapes, the saved optimizer and normalizer state)."""
    fixed = sorted(key for key in overrides
                   if key not in config.changeable_on_resume and getattr(config, key) != trained.get(key))
    if fixed:
        changes = ", ".join(f"{key}={getattr(config, key)!r} (checkpoint: {trained.get(key)!r})" for key in fixed)
        changeable = ", ".join(sorted(config.changeable_on_resume & set(type(config).model_fields)))
        raise UsageError(f"--resume {path}: {changes} cannot change on resume (the checkpoint's networks and "
                         f"state were built with the old value); start a new run for it. A resume may change: "
                         f"{changeable}")
