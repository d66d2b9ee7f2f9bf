"""``unilab-train``'s command line as a whole: ``train_args``' flags with ``--eval`` (judge the
run afterwards, ``train_eval``) and ``--seeds`` (several seeds side by side, ``seeds``), the
flags that contradict each other, and the read-only check of a whole command.
"""

from __future__ import annotations

import argparse

from unilab_rl.algorithms import UnknownAlgorithm
from unilab_rl.checkpoint import CheckpointError
from unilab_rl.cli import train_args, train_eval
from unilab_rl.cli.overrides import OverrideError
from unilab_rl.cli.run_dir import RunDirError
from unilab_rl.cli.run_record import RunRecordError
from unilab_rl.cli.train_args import UsageError
from unilab_rl.cli.train_plan import prepare

EXIT_BAD_INPUT = 2
# What unilab-train reports as bad input (exit 2, nothing written): the errors its main() catches.
BAD_INPUT = (UsageError, UnknownAlgorithm, OverrideError, CheckpointError, RunDirError, RunRecordError)


def build_parser(tasks: list[str] | None = None, backends: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; ``tasks`` and ``backends``, when given, are listed in ``--help``."""
    parser = train_args.build_parser(tasks, backends)
    train_eval.add_arguments(parser)
    parser.add_argument("--seeds", type=parse_seeds, metavar="K,K,...",
                        help="train one process per seed side by side, each under OUT/seed-K/ (its output in "
                             "OUT/seed-K/log.txt), and tabulate them in OUT/seeds.json")
    parser.epilog += ("\nWith --eval: training's exit code when it failed, else the evaluation's (0 passed, 1 a case "
                      "failed\nat the last checkpoint). With --seeds: an error's if any seed had one, else 1 if any "
                      "seed's last\ncheckpoint failed, else 0.")
    return parser


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` -> [0, 1, 2]; at least two distinct non-negative integers."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        seeds = []
    if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected two or more distinct non-negative integers, "
                                         "comma-separated (e.g. --seeds 0,1,2)")
    return seeds


def parse_command(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The parsed command and its evaluation options (``eval.KEY=VALUE``, taken out of the
    training overrides); flags that contradict each other are the parser's error (exit 2)."""
    args = parser.parse_intermixed_args(argv)  # key=value may follow flags
    eval_options, args.overrides = train_eval.split_evaluation_options(args.overrides)
    if eval_options and not args.eval:
        parser.error(f"{' '.join(eval_options)}: evaluation options need --eval")
    if args.seeds is not None:
        clashing = [flag for flag, given in (("--seed", args.seed is not None), ("--nproc", args.nproc != 1)) if given]
        if clashing:
            parser.error(f"--seeds runs one process per seed: drop {' and '.join(clashing)}")
        if args.resume is not None:
            parser.error("--seeds with --resume: every seed would continue the same checkpoint; resume each "
                         "seed's run on its own (--resume OUT/seed-K/checkpoint.pt --out OUT/seed-K)")
        shared = [flag for flag, path in (("--curve-json", args.curve_json), ("--summary-json", args.summary_json))
                  if path is not None]
        if shared:
            parser.error(f"--seeds with {' and '.join(shared)}: every seed would write the same file; each seed "
                         "writes its own under OUT/seed-K/")
    return args, eval_options


def check_command(argv: list[str], tasks: list[str], backends: list[str] | None) -> None:
    """Check a one-run ``unilab-train`` command as its run would before training (``--out`` and,
    with ``--eval``, the evaluation's options included), and its env overrides as building the
    env would resolve them, without building or creating anything; raises one of ``BAD_INPUT``."""
    from unilab import task_config

    parser = build_parser(tasks, backends)

    def refuse(message: str) -> None:  # argparse would print the usage and exit
        raise UsageError(message)

    parser.error = refuse  # type: ignore[method-assign]
    args, eval_options = parse_command(parser, argv)
    plan = prepare(args, tasks, check_out=True, backends=backends)
    try:  # prepare leaves the env's keys to the env; an unknown one would fail only in the run
        task_config(args.task, plan["env_overrides"])
    except (ValueError, KeyError) as error:  # as unilab-train's build_env reports them
        raise UsageError(str(error).strip("'\"")) from None
    if args.eval:
        train_eval.check_evaluation(args.task, args.out, eval_options)
