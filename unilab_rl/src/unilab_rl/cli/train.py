"""``unilab-train``: the composition root that builds the env with unilab and injects it.

Order matters for bad input: every check that can fail runs before anything is written.
First the arguments (algorithm, overrides, task, budget, seed, the resume checkpoint and the
overrides it may take, --out and the other output paths), then what only building can
detect: the env (its config's constraints, its terms, the backend options), the learner,
the replay buffer, loading the checkpoint's state. Only then is --out created and locked;
so a bad command, whichever check refuses it, changes nothing on disk.

Run directories are owned (see unilab_rl.cli.run_dir): a directory that holds a run takes
a new one only with --resume of its own checkpoint or with --overwrite, and one live run
at a time holds it.

Exit codes: 0 done, 2 bad input, 3 the learner diverged (a NaN or inf loss or state; nothing
is saved), 130 interrupted by SIGINT, 143 by SIGTERM (a scheduler's preemption); on either
signal the current step finishes and a checkpoint is saved first.

Where a value comes from, first match wins: the command line, the ``--resume`` checkpoint
(task, backend, algorithm and its config, env count, seed, env overrides), the ``--config``
run record (see unilab_rl.cli.run_record), the ``--preset``, the defaults. Every run writes
``OUT/run.json``, the resolved configuration with versions and git commit, which
``--config`` runs again.

Progress: a bar when stdout and stderr are terminals; otherwise (a log file, a pipe, a batch
job) one status line every 10 s, and with ``--no-progress`` one every 30 s.

Presets and goals: ``--preset NAME`` starts from a named preset (task, backend, env count,
budget, tuned overrides, goals; see unilab_rl.cli.presets); flags and overrides given here win.
``--goal 'NAME<VALUE'`` (repeatable, added to the preset's) names a logged metric to watch;
the run's ``summary.json`` says when all goals were first met and whether they held at the
end. Goals never stop a run.

Several GPUs: ``unilab-train --nproc N ...``, which launches ``torchrun --nproc-per-node=N -m
unilab_rl.cli.train ...`` (one process per GPU, each with its own envs and replay, seeds offset
by rank, gradients averaged, rank 0 logs and checkpoints; see unilab_rl.distributed).

Judged afterwards: ``--eval [eval.KEY=VALUE ...]`` runs the task's evaluation on the finished
run as ``unilab-eval --checkpoint OUT`` does, into ``OUT/eval/`` (see unilab_rl.cli.train_eval);
the exit code is then the evaluation's. Several seeds: ``--seeds 0,1,2`` trains one process per
seed side by side under ``OUT/seed-K/`` and tabulates them in ``OUT/seeds.json`` (see
unilab_rl.cli.seeds). Flags that contradict each other (``--seeds`` with ``--seed``, ``--nproc``,
``--resume``, ``--curve-json`` or ``--summary-json``; ``eval.`` options without ``--eval``) exit 2
before anything runs.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from unilab_rl import distributed, early_signals
from unilab_rl.algorithms import build_agent, update_metric_names
from unilab_rl.atomic_file import DiskFull
from unilab_rl.checkpoint import CheckpointError
from unilab_rl.cli import seeds as seeds_cli
from unilab_rl.cli import train_eval
from unilab_rl.cli.launch import launch_torchrun, without_flags
from unilab_rl.cli.metrics_sink import TrainingSink, write_json_atomic
from unilab_rl.cli.process_clock import python_writes_bytecode, seconds_since_process_start
from unilab_rl.cli.run_dir import RunDirError, claim_run_dir
from unilab_rl.cli.run_record import (
    RECORD_FORMAT,
    RECORD_FORMAT_VERSION,
    RECORD_NAME,
    git_commit,
    versions,
)
from unilab_rl.cli.show_config import resolved_config_text
from unilab_rl.cli.stopping import StopOnSignal
from unilab_rl.cli.summary import write_summary
from unilab_rl.cli.train_args import DEFAULT_STEPS, UsageError, check_preset_device
from unilab_rl.cli.train_command import BAD_INPUT, EXIT_BAD_INPUT, build_parser, parse_command
from unilab_rl.cli.train_plan import prepare
from unilab_rl.collector import COLLECTOR_METRICS
from unilab_rl.contract import ContractViolation, EnvFactory, EnvSpec, RunnerEnv
from unilab_rl.goals import GoalError, GoalTracker, check_known
from unilab_rl.learner import drop_update_graphs
from unilab_rl.runner import (
    LOSS_METRIC_PREFIX,
    TIMED_PHASES,
    EnvProducedNothing,
    LearnerDiverged,
    OffPolicyRunner,
    RunIdentity,
)
from unilab_rl.threads import apply_thread_policy

EXIT_INTERRUPTED = 130  # SIGINT
EXIT_TERMINATED = 143  # SIGTERM
EXIT_DIVERGED = 3
PROGRESS_LINE_EVERY_S = 10.0  # stdout not a terminal: status lines instead of a bar
NO_PROGRESS_LINE_EVERY_S = 30.0  # --no-progress
RUNNER_METRICS = ("perf/env_steps_per_s", "progress/updates", "progress/replay_transitions",
                  *(f"perf/{phase}_ms" for phase in TIMED_PHASES))
# Named only as a run logs them: what an env adds to its metrics (contract: "time/...", "curriculum/...")
# and the keys of its per-step log (``info["log"]``).
OPEN_METRIC_PREFIXES = ("env/time/", "env/curriculum/", "env_log/")
DATA_PARALLEL_METRICS = ("perf/env_steps_per_s_all_ranks",)  # logged only when several ranks run


def default_env_factory() -> tuple[EnvFactory, list[str]]:
    """The injected dependency: unilab's env factory and its task names."""
    from unilab import list_tasks, make_manager_based_rl_env

    def make_training_env(task: str, *, overrides: dict[str, Any] | None = None, **kwargs: Any) -> RunnerEnv:
        # This runner keeps its actions finite (the policy sees only finite, quarantined
        # observations, and a non-finite loss stops training at the next flush), so the
        # env's per-step NaN check on actions, a host sync every step, is turned off.
        return make_manager_based_rl_env(task, overrides={"validate_actions": False, **(overrides or {})}, **kwargs)

    return make_training_env, list_tasks()


def known_backends() -> list[str] | None:
    """The active simulator backends (for --help), or None when unisim cannot say."""
    try:
        from unisim import backend_scope

        return list(backend_scope().active)
    except (ImportError, OSError, KeyError, ValueError):
        return None


def task_fingerprint(task: str, env_overrides: dict[str, Any]) -> str | None:
    """The resolved env config's fingerprint (the one ``unilab-export`` writes), or None for
    a task unilab does not know (an env factory injected by a test)."""
    try:
        from unilab.fingerprint import task_fingerprint as fingerprint

        return fingerprint(task, env_overrides)
    except (ImportError, ValueError, KeyError):
        return None


def build_env(factory: EnvFactory, args: argparse.Namespace, device: str | None, seed: int,
              env_overrides: dict[str, Any]) -> RunnerEnv:
    """The env, or a UsageError naming what was asked for: a bad override value (its key),
    an env config a term or the backend refuses, or one too large for memory."""
    try:
        return factory(args.task, backend=args.backend, num_envs=args.num_envs, device=device, seed=seed,
                       overrides=env_overrides)
    except (MemoryError, torch.OutOfMemoryError) as error:
        detail = f" ({error})" if str(error) else ""
        raise UsageError(f"--num-envs {args.num_envs}: out of memory building the env{detail}; use fewer envs"
                         ) from None
    except (ValueError, KeyError) as error:  # the factory's and the config's checks name the key themselves
        raise UsageError(str(error).strip("'\"")) from None
    except (TypeError, ArithmeticError, IndexError, RuntimeError) as error:
        # Anything else a term or the backend raised while building is reported with what
        # was asked for.
        asked = ", ".join(f"{k}={v}" for k, v in env_overrides.items() if k != "validate_actions") or "none"
        raise UsageError(f"the env could not be built (--task {args.task} --backend {args.backend} "
                         f"--num-envs {args.num_envs}, env overrides: {asked}): {type(error).__name__}: "
                         f"{error}") from None


def build_learning(env: RunnerEnv, spec: EnvSpec, args: argparse.Namespace, plan: dict[str, Any],
                   rank: distributed.RankInfo | None, phases: dict[str, float]) -> tuple[Any, OffPolicyRunner]:
    """The learner and the runner (the replay buffer is allocated here), the checkpoint's
    state loaded; memory and shape errors become a UsageError naming the argument. Adds the
    seconds each took to ``phases`` (``learner_s``, ``replay_and_runner_s``)."""
    config = plan["algo_config"]
    started = time.perf_counter()
    try:
        agent = build_agent(args.algo, spec, config, spec.device)
    except ValueError as error:  # a setting this env cannot serve (symmetry on a task without a mirror)
        raise UsageError(str(error)) from None
    except (MemoryError, torch.OutOfMemoryError, RuntimeError) as error:
        raise UsageError(f"building the {args.algo} learner failed ({type(error).__name__}: {error}); check the "
                         "network overrides (actor_width, critic_width, ...)") from None
    phases["learner_s"] = time.perf_counter() - started
    started = time.perf_counter()
    identity = RunIdentity(args.task, args.backend, args.algo, args.seed, plan["env_overrides"])
    runner_config, out = plan["runner_config"], args.out
    if rank is not None and not rank.is_main:  # the main rank writes the run, snapshots included
        runner_config, out = runner_config.model_copy(update={"snapshot_at_s": (), "snapshot_at_steps": ()}), None
    try:
        runner = OffPolicyRunner(env, agent, config, identity, out, None, runner_config)
    except ValueError as error:  # a runner setting this device cannot run (overlap_learning on the host)
        raise UsageError(str(error)) from None
    except (MemoryError, torch.OutOfMemoryError, RuntimeError) as error:
        transitions = args.num_envs * config.replay_capacity_per_env
        raise UsageError(f"allocating the replay buffer failed: --num-envs {args.num_envs} x "
                         f"replay_capacity_per_env={config.replay_capacity_per_env} = {transitions} transitions "
                         f"({type(error).__name__}: {str(error).splitlines()[0]}); lower either") from None
    phases["replay_and_runner_s"] = time.perf_counter() - started  # a resumed state's loading is in other_s
    document = plan["document"]
    if document is not None:
        trained = document["spec"]
        if dict(trained["observation_spec"]) != spec.observation_spec or trained["action_dim"] != spec.action_dim:
            raise CheckpointError(
                f"--resume {args.resume}: trained with observations {dict(trained['observation_spec'])} and "
                f"action_dim {trained['action_dim']}; the env built from this command's overrides has "
                f"{spec.observation_spec} and {spec.action_dim}")
        try:
            runner.restore(document)
        except CheckpointError as error:  # the env's part: already says what does not fit
            raise CheckpointError(f"--resume {args.resume}: {error}") from None
        except (RuntimeError, KeyError, ValueError, TypeError) as error:
            raise CheckpointError(f"--resume {args.resume}: its learner state does not fit the {args.algo} learner "
                                  f"of this command ({type(error).__name__}: {str(error).splitlines()[0]})") from None
        reseed_other_ranks(rank, args.seed, runner.env_steps)
    return agent, runner


def reseed_other_ranks(rank: distributed.RankInfo | None, seed: int, env_steps: int) -> None:
    """After a resume, give each rank but the main one a stream of its own again: the
    checkpoint holds the main rank's random state, which ``restore`` put on every rank, so
    all would draw the same exploration noise and replay indices. From the rank's seed and
    the resumed step count, so a resume is reproducible."""
    if rank is None or rank.is_main:
        return
    torch.manual_seed((seed + rank.rank) * 1_000_003 + env_steps)


def train(args: argparse.Namespace, factory: EnvFactory, tasks: list[str], backends: list[str] | None = None,
          check: Callable[[argparse.Namespace], None] | None = None) -> int:
    """Train the run ``args`` describe; ``check``, when given, checks the resolved command further
    before anything is built (``--eval``'s options)."""
    imports_s = seconds_since_process_start()  # the interpreter and imports before this command's clock
    started = time.perf_counter()
    rank = distributed.rank_from_environment()  # set by torchrun; None for a plain run
    is_main = rank is None or rank.is_main
    plan = prepare(args, tasks, check_out=is_main, backends=backends)
    early_signals.check()  # a SIGINT during start-up (the imports included) ends it here: exit 130
    check_preset_device(args, torch.cuda.is_available())
    if check is not None:
        check(args)
    seed = args.seed + (0 if rank is None else rank.rank)  # each rank explores differently
    device = args.device
    if rank is not None and device is None and torch.cuda.is_available():
        device = f"cuda:{rank.local_rank}"
    torch.manual_seed(seed)
    random.seed(seed)
    if is_main:  # said up front: a backend's first build may compile kernels (Genesis: minutes on a CPU)
        print(f"unilab-train: building {args.num_envs} envs of {args.task} on {args.backend}", flush=True)
    build_started = time.perf_counter()
    env = build_env(factory, args, device, seed, plan["env_overrides"])
    early_signals.check()
    startup_phases = {"env_build_s": time.perf_counter() - build_started}  # the rest (checks too): other_s
    sink = agent = lock = stopper = None
    # A bar redraws one line with carriage returns: right on a terminal, one garbled line in
    # a log file; elsewhere progress prints as status lines.
    show_bar = not args.no_progress and sys.stdout.isatty() and sys.stderr.isatty()
    line_every_s = NO_PROGRESS_LINE_EVERY_S if args.no_progress else PROGRESS_LINE_EVERY_S
    tracker = GoalTracker(plan["goals"])
    try:
        try:
            spec = EnvSpec.from_env(env)
        except ContractViolation as error:  # e.g. an override dropped an observation group the learner reads
            raise UsageError(f"the env built from this command does not fit the runner: {error}") from None
        try:  # a goal on a metric this run never logs is a typo: refuse it before training
            ranked = DATA_PARALLEL_METRICS if rank is not None and rank.world_size > 1 else ()
            check_known(plan["goals"], [*COLLECTOR_METRICS, *RUNNER_METRICS, *ranked,
                                        *(f"{LOSS_METRIC_PREFIX}{n}" for n in update_metric_names(args.algo)),
                                        *(f"env/{n}" for n in spec.metric_names)], OPEN_METRIC_PREFIXES)
        except GoalError as error:
            raise UsageError(str(error)) from None
        apply_thread_policy(spec.device, args.torch_threads)
        if rank is not None:
            distributed.start(rank, spec.device)
        agent, runner = build_learning(env, spec, args, plan, rank, startup_phases)
        # From here a SIGINT/SIGTERM stops the run at its first step with a checkpoint (the
        # files below, and a data-parallel peer still starting, may come after the signal).
        early_signals.settle()  # exit 130 if interrupted so far; else the loop's handler takes SIGINT
        stopper = StopOnSignal(runner)
        if is_main:  # every check has passed: from here on this run owns --out
            try:
                lock = claim_run_dir(args.out, args.resume, args.overwrite)
            except RunDirError as error:
                raise UsageError(str(error)) from None
            header = {"task": args.task, "backend": args.backend, "algo": args.algo, "num_envs": args.num_envs,
                      "device": str(spec.device), "seed": args.seed, "world_size": 1 if rank is None else rank.world_size,
                      "algo_config": plan["algo_config"].model_dump(), "env_overrides": plan["env_overrides"],
                      "command": " ".join(sys.argv)}
            write_json_atomic(args.out / RECORD_NAME, run_record(args, plan, spec, header["world_size"]))
            sink = TrainingSink(args.out, args.curve_json, header, tensorboard=not args.no_tensorboard,
                                print_every_s=None if show_bar else line_every_s, on_write=tracker.observe)
            sink.set_max_episode_length(spec.max_episode_length)
            runner.sink = sink
        if rank is not None:
            distributed.synchronize_learner(agent, rank)
            agent.gradient_hook = distributed.average_gradients
            runner.stop_consensus = distributed.stop_consensus(spec.device)
        budget_steps = None if args.steps is None else runner.env_steps + args.steps
        budget_seconds = None if args.minutes is None else args.minutes * 60.0
        if budget_steps is None and budget_seconds is None:
            budget_steps = runner.env_steps + DEFAULT_STEPS
        if sink is not None:
            sink.set_budget(runner.env_steps, budget_steps, runner.elapsed_before_resume_s, budget_seconds)
        # Start-up (env build, graph capture, learner and replay allocation) is not training
        # time: said here, and kept in the summary apart from the budget. It counts from the
        # parsed command, so Python's imports before it are not in it.
        startup_s = time.perf_counter() - started
        startup_phases["other_s"] = startup_s - sum(startup_phases.values())
        if is_main:
            parts = ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} {v:.1f} s" for k, v in startup_phases.items())
            launch = "" if imports_s is None else f", {imports_s + startup_s:.1f} s from launch with the imports"
            print(f"unilab-train: start-up took {startup_s:.1f} s ({parts}){launch}; training starts", flush=True)
            if not python_writes_bytecode():
                # Mostly torch's compiler, which the learner imports: FlashSAC's start-up on an H100 read
                # 10.6-14.1 s without bytecode and 4.7-5.2 s with it.
                print("unilab-train: this Python writes no bytecode (PYTHONDONTWRITEBYTECODE or -B), so each "
                      "launch compiles the imported packages' sources again; the figures above include that. "
                      "Unset PYTHONDONTWRITEBYTECODE (where the site-packages are read-only, also set "
                      "PYTHONPYCACHEPREFIX to a writable folder) to keep it", flush=True)
        result = runner.train(budget_steps, budget_seconds, progress=is_main and show_bar)
        distributed.finish_together()  # every rank is past its last collective and rank 0 has saved
        if is_main:
            write_summary(args, result, tracker, started, startup_s, startup_phases, imports_s,
                          simulator=env.simulator_diagnostics())
    finally:
        if stopper is not None:
            stopper.restore()
        if sink is not None:
            sink.close()
        env.close()
        if agent is not None:
            drop_update_graphs(agent)  # before the process group they captured collectives of
        distributed.stop()
        if lock is not None:
            lock.release()
    # A rank's interrupt is the launcher's to report (torchrun counts non-zero as a failure).
    return stopper.exit_code if result.interrupted and rank is None else 0


def run_record(args: argparse.Namespace, plan: dict[str, Any], spec: EnvSpec, world_size: int) -> dict[str, Any]:
    """What ``OUT/run.json`` holds: the resolved configuration this session trains with
    (``--config`` reads it back; see unilab_rl.cli.run_record) and its provenance."""
    return {
        "format": RECORD_FORMAT, "format_version": RECORD_FORMAT_VERSION,
        "task": args.task, "backend": args.backend, "algo": args.algo, "num_envs": args.num_envs,
        "seed": args.seed, "device": args.device, "resolved_device": str(spec.device), "world_size": world_size,
        "budget": {"steps": args.steps, "minutes": args.minutes},
        "algo_config": plan["algo_config"].model_dump(mode="json"),
        "runner_config": plan["runner_config"].model_dump(mode="json"),
        "env_overrides": dict(plan["env_overrides"]),
        "task_fingerprint": task_fingerprint(args.task, dict(plan["env_overrides"])),
        "preset": args.preset if plan["record"] is None else plan["record"].get("preset"),
        "config": None if args.config is None else str(args.config),
        "goals": [str(goal) for goal in plan["goals"]],
        "resumed_from": None if args.resume is None else str(args.resume),
        "versions": versions(), "git_commit": git_commit(),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
    }


def main(argv: list[str] | None = None, factory: EnvFactory | None = None, tasks: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    backends = None
    if factory is None or tasks is None:
        factory, tasks = default_env_factory()
        backends = known_backends()
    args, eval_options = parse_command(build_parser(tasks, backends), argv)
    if args.list_tasks:
        print("\n".join(tasks))
        return 0
    if args.seeds is not None or args.nproc > 1:  # the launched processes handle SIGINT themselves
        early_signals.settle()
    if args.seeds is not None:  # each seed's process runs this command with --seed K, --eval included
        return seeds_cli.run_side_by_side(args.seeds, args.out, argv, tasks, backends)

    def check_evaluation(resolved: argparse.Namespace) -> None:
        if resolved.eval:  # once the task is resolved, before anything is built
            train_eval.check_evaluation(resolved.task, resolved.out, eval_options)

    try:
        if args.show_config:  # resolved and printed; nothing built or written
            print(resolved_config_text(args, prepare(args, tasks, check_out=False, backends=backends)))
            return 0
        if args.nproc < 1:
            raise UsageError(f"--nproc must be >= 1, got {args.nproc}")
        if distributed.rank_from_environment() is not None and (args.nproc > 1 or args.eval):
            raise UsageError(f"{'--nproc' if args.nproc > 1 else '--eval'} is for the launching command; this "
                             "process is already a torchrun rank")
        if args.nproc > 1:
            prepare(args, tasks, backends=backends)  # bad input fails here, once, before any rank starts
            check_evaluation(args)
            # The ranks train; this process judges the run once they are done.
            code = launch_torchrun(args.nproc, without_flags(train_eval.without_evaluation(argv), ("--nproc",)))
        else:
            code = train(args, factory, tasks, backends, check=check_evaluation)
    except BAD_INPUT as error:
        print(f"unilab-train: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except LearnerDiverged as error:
        print(f"unilab-train: error: {error}", file=sys.stderr)
        return EXIT_DIVERGED
    except (DiskFull, EnvProducedNothing) as error:  # after training started: exit 1, the cause named
        print(f"unilab-train: error: {error}", file=sys.stderr)
        return 1
    if code != 0 or not args.eval:
        return code
    return train_eval.judge_run(args.out, eval_options)


if __name__ == "__main__":
    # How torchrun starts each rank. A rank that dies in native code (a signal such as
    # SIGABRT or SIGSEGV) prints its Python threads' stacks before torchrun's report.
    faulthandler.enable()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
