"""``unilab-train --eval``: the finished run judged by the task's evaluation.

Exactly what ``unilab-eval --checkpoint OUT --out OUT/eval`` does: the snapshots
``runner.snapshot_at_s`` and ``runner.snapshot_at_steps`` kept, then the final checkpoint, each
with a report in ``OUT/eval/`` and all in ``OUT/eval/over-time.json``, so one command answers
when the policy first passed. ``eval.KEY=VALUE`` tokens go to the evaluation
(``eval.envs_per_command=8``); they are checked against the task's protocol before training
starts. A run that kept an averaged policy (``averaged_policy_tau``) is judged by it in
``eval/`` and by its latest actor in ``eval-latest-actor/``: the average is what acts and what
the exit code reports, the latest actor beside it says whether the average pays.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli.overrides import parse_tokens
from unilab_rl.cli.run_dir import check_writable
from unilab_rl.cli.run_record import RECORD_NAME
from unilab_rl.cli.train_args import UsageError
from unilab_rl.policy import acting_actor

EVAL_PREFIX = "eval."
EVAL_DIR = "eval"
LATEST_ACTOR_DIR = "eval-latest-actor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--eval", action="store_true",
                        help="after training, judge every kept checkpoint by the task's evaluation into OUT/eval "
                             "(as unilab-eval --checkpoint OUT); eval.KEY=VALUE tokens set its protocol")


def split_evaluation_options(tokens: list[str]) -> tuple[list[str], list[str]]:
    """``key=value`` tokens as (the evaluation's ``eval.KEY=VALUE``, the training run's)."""
    return ([t for t in tokens if t.startswith(EVAL_PREFIX)], [t for t in tokens if not t.startswith(EVAL_PREFIX)])


def without_evaluation(argv: list[str]) -> list[str]:
    """The command without ``--eval`` and its options: what the training processes are given
    (torchrun's ranks; the launching process judges the run once they are done)."""
    return [token for token in argv if token != "--eval" and not token.startswith(EVAL_PREFIX)]


def check_evaluation(task: str, out: Path, options: list[str]) -> None:
    """Refuse, before training, what the evaluation would refuse after it: a task without an
    evaluation, an option its protocol lacks or a bad value, an ``OUT/eval`` that cannot be written."""
    from unilab.evaluation import task_evaluation

    try:
        task_evaluation(task, {k.removeprefix(EVAL_PREFIX): v for k, v in parse_tokens(options).items()})
    except (ValueError, KeyError) as error:  # a KeyError's message comes quoted
        raise UsageError("--eval: " + str(error).strip("'\"")) from None
    check_writable(out / EVAL_DIR, "--eval")


def judge_run(out: Path, options: list[str]) -> int:
    """unilab-eval of the run in ``out``: its exit code, of the policy that acts (0 passed, 1 a
    case failed at the last checkpoint, 2 bad input)."""

    def judge(folder: str, *flags: str) -> int:
        argv = ["--checkpoint", str(out), "--out", str(out / folder), *flags, *options]
        print("unilab-train: unilab-eval " + " ".join(argv), flush=True)
        return eval_cli.main(argv)

    code = judge(EVAL_DIR)
    if code in (0, eval_cli.EXIT_FAILED) and kept_averaged_policy(out):
        latest_code = judge(LATEST_ACTOR_DIR, "--latest-actor")
        if latest_code not in (0, eval_cli.EXIT_FAILED):
            return latest_code
    return code


def kept_averaged_policy(out: Path) -> bool:
    """Whether the run in ``out`` kept an averaged policy, by its record (which carries the same
    ``algo_config`` as its checkpoints)."""
    return acting_actor(json.loads((out / RECORD_NAME).read_text())) == "averaged"
