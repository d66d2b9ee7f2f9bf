"""``unilab-train``'s arguments: the parser, its defaults, and what ``--preset`` fills in."""

from __future__ import annotations

import argparse
from pathlib import Path

from unilab_rl.algorithms import ALGORITHMS
from unilab_rl.cli.presets import PRESETS, lookup_preset
from unilab_rl.runner_config import RunnerConfig

DEFAULTS = {"task": "g1_walk_flat", "backend": "mujoco", "algo": "flashsac", "num_envs": 64, "seed": 0}
DEFAULT_STEPS = 1_000_000  # the budget when neither --steps nor --minutes (nor a preset or record) gives one


class UsageError(ValueError):
    pass


def apply_preset(args: argparse.Namespace) -> None:
    """Fill what the command line left unset from ``--preset`` (then the defaults); the
    preset's overrides go first so the command line's win, its goals join ``--goal``."""
    preset = None
    if args.preset is not None:
        try:
            preset = lookup_preset(args.preset)
        except ValueError as error:
            raise UsageError(str(error)) from None
    for key, default in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, getattr(preset, key, default) if preset is not None else default)
    if preset is None:
        return
    try:
        if args.steps is None and args.minutes is None:
            args.minutes = preset.minutes_for(args.algo)
        args.overrides = [*preset.overrides_for(args.algo), *args.overrides]
    except ValueError as error:
        raise UsageError(str(error)) from None
    args.goal = [*preset.goals, *args.goal]


# The flags a bare override key may not name (``num_envs=64`` is ``--num-envs 64``).
FLAGS = ("--task", "--backend", "--algo", "--num-envs", "--device", "--seed", "--steps", "--minutes", "--out",
         "--resume", "--preset", "--config", "--nproc", "--torch-threads", "--goal", "--overwrite")

# What a GPU preset's run becomes on a machine without CUDA (docs/training.md's quick start).
CPU_COMMAND = "--backend mujoco --algo fastsac --num-envs 32 --minutes 5 (docs/training.md, Quick start)"


def check_preset_device(args: argparse.Namespace, cuda_available: bool) -> None:
    """A GPU preset (mjwarp, 4096 envs) on a machine without CUDA is refused before
    anything is built, with the CPU command, instead of one missing setting at a time after
    the envs are built."""
    if args.preset is None or cuda_available:
        return
    preset = lookup_preset(args.preset)
    if preset.needs_cuda and args.backend == preset.backend:  # a backend of the command line's own: its checks
        raise UsageError(f"preset {args.preset} needs a CUDA GPU ({preset.backend}, {preset.num_envs} envs) and this "
                         f"machine has none; on a CPU use --task {preset.task} {CPU_COMMAND}")


def build_parser(tasks: list[str] | None = None, backends: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``tasks`` and ``backends``, when given, are listed in ``--help``."""
    lists = [f"algorithms: {', '.join(sorted(ALGORITHMS))}", f"presets: {', '.join(sorted(PRESETS))}"]
    if tasks:
        lists.insert(0, f"tasks: {', '.join(tasks)}")
    if backends:
        lists.insert(1, f"backends: {', '.join(backends)}")
    parser = argparse.ArgumentParser(
        prog="unilab-train", description="Train an off-policy policy on a unilab task.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join([
            *lists, "",
            "Overrides: key=value, before or after the flags, each under its namespace: algo.<field> (the",
            "algorithm's config), env.<key> (a dotted key of the task's config, e.g.",
            "env.rewards.velocity.weights.alive=2) or runner.<field>, one of:",
            f"{', '.join(RunnerConfig.model_fields)}.",
            "A bare key is taken where it names one setting of the three (batch_size=4096,",
            "episode_length_s=10); one both the algorithm and the env have is refused (cuda_graph:",
            "write algo.cuda_graph or env.cuda_graph), as is an unknown one, naming the nearest key.",
            "--show-config prints every algo.<field> and runner.<field> with the value this command resolves.",
            "",
            "Precedence: command line > --resume checkpoint > --config record > --preset > defaults.",
            "Every run writes OUT/run.json (resolved configuration, versions, git commit); --config runs it again.",
            "Exit codes: 0 done, 2 bad input (nothing written), 3 the learner diverged, 130 SIGINT, 143 SIGTERM.",
        ]))
    parser.add_argument("--list-tasks", action="store_true", help="print the registered tasks and exit")
    parser.add_argument("--show-config", action="store_true",
                        help="print the resolved configuration (task, backend, every algo.<field> and runner.<field> "
                             "with its value, the env overrides) and exit without building an env")
    parser.add_argument("--config", type=Path, metavar="RUN_JSON",
                        help="run again what a run record (OUT/run.json) holds; flags and key=value given here win")
    parser.add_argument("--preset", help=f"start from a named preset: {', '.join(sorted(PRESETS))}")
    parser.add_argument("--task", help=f"registered task (default {DEFAULTS['task']}; --list-tasks lists them) or "
                        "package.module:task_name, a task of your own package (the module is imported)")
    parser.add_argument("--backend", help=f"simulator backend (default {DEFAULTS['backend']})")
    parser.add_argument("--algo", help=f"one of: {', '.join(sorted(ALGORITHMS))} (default {DEFAULTS['algo']})")
    parser.add_argument("--num-envs", type=int, help=f"parallel envs (default {DEFAULTS['num_envs']})")
    parser.add_argument("--device", default=None, help="torch device (default: the env decides; the one GPU if visible)")
    parser.add_argument("--seed", type=int, help=f"seed (default {DEFAULTS['seed']})")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--steps", type=int, help="env steps (transitions over all envs) to run this session "
                                                  f"(default {DEFAULT_STEPS} when no --minutes)")
    budget.add_argument("--minutes", type=float, help="wall-clock minutes to run this session")
    parser.add_argument("--out", type=Path, default=Path("runs/train"), help="run directory (default runs/train)")
    parser.add_argument("--resume", type=Path, help="checkpoint to continue from (its task, algorithm and config)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace the run --out already holds (its checkpoint, metrics, summary, TensorBoard)")
    parser.add_argument("--curve-json", type=Path, help="also write the learning curve (wall-clock) here")
    parser.add_argument("--summary-json", type=Path, help="where the run summary goes (default: OUT/summary.json)")
    parser.add_argument("--goal", action="append", default=[], metavar="'NAME<VALUE'",
                        help="a logged metric and threshold to report on (repeatable)")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar: a status line every 30 s (without a terminal: every 10 s anyway)")
    parser.add_argument("--no-tensorboard", action="store_true", help="write no TensorBoard events")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="intra-op threads for the learner (default 1 when the env runs on the CPU)")
    parser.add_argument("--nproc", type=int, default=1,
                        help="processes (one per GPU) to launch through torchrun (default 1: this process trains)")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    return parser
