"""One-command GPU run: ``unilab-train --preset gpu_walk`` with a fixed output layout.

    python -m unilab_rl.cli.gpu_walk --out "$OUT" [--minutes M] [--algo flashsac] [--nproc N] [--eval] [key=value ...]

Writes under --out: ``run/`` (checkpoint, run.json, metrics.jsonl, TensorBoard), ``curve.json``
(headline numbers and the task's metrics vs wall-clock; rewritten at every log interval,
so a run cut by a time limit still leaves its curve) and ``summary.json`` (the preset's
goals, when they were first met, the median learning rate, the final numbers). Every other
``unilab-train`` flag passes through (``--minutes``, ``--algo``, ``--num-envs``, ``--seed``,
``--nproc N`` for N GPUs through torchrun, ``--preset gpu_track`` for the tracking preset in the same
layout, ...), and so do ``key=value`` overrides, which win
over the preset's (e.g. ``batch_size=16384 updates_per_step=1``); see ``unilab-train --help``.

``--eval`` then judges the run by the task's evaluation (``unilab-eval --checkpoint OUT/run``:
the snapshots ``runner.snapshot_at_s`` and ``runner.snapshot_at_steps`` kept, then the final
checkpoint) into ``eval/`` (one
report per checkpoint and ``over-time.json``), so one command answers when the policy first
passed; ``eval.KEY=VALUE`` tokens go to the evaluation (e.g. ``eval.envs_per_command=8``). A run
that kept an averaged policy (``averaged_policy_tau``) is judged by it in ``eval/`` and by its
latest actor in ``eval-latest-actor/``. Exit code: training's when it failed, else the
evaluation's of ``eval/`` (0 passed, 1 some case failed at the last checkpoint).

``--seeds 0,1,2`` runs one such command per seed at once on the same machine (each its own
process, under ``OUT/seed-K/``) and writes ``OUT/seeds.json``: per seed, its env steps and, with
``--eval``, each kept checkpoint's env steps and cases passed. Seeds sharing a GPU each run at a
fraction of one's throughput, so compare them at equal env steps (``runner.snapshot_at_steps``).
A command that any seed's run would refuse (a bad flag or override, a seed folder that already
holds a run) is refused before any seed starts: exit code 2, nothing created under OUT.
Exit code: an error's if any seed had one, else 1 if any seed's last checkpoint failed, else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import seeds as seeds_cli
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.evaluate import EXIT_FAILED
from unilab_rl.cli.play import acting_actor


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m unilab_rl.cli.gpu_walk", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
                                     usage="%(prog)s [--out OUT] [unilab-train flags, e.g. --minutes M --algo A "
                                           "--nproc N] [key=value ...]")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "runs/gpu_walk")),
                        help="output folder (default: $OUT, else runs/gpu_walk)")
    parser.add_argument("--eval", action="store_true",
                        help="after training, judge every kept checkpoint by the task's evaluation into OUT/eval")
    parser.add_argument("--seeds", help="two or more seeds, comma-separated, run side by side (OUT/seed-K/)")
    parser.add_argument("--preset", default="gpu_walk", help="the training preset (default: gpu_walk)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    eval_options = [token for token in rest if token.startswith("eval.")]
    if eval_options and not args.eval:  # before --seeds too: every seed's process would refuse it
        parser.error(f"{' '.join(eval_options)}: evaluation options need --eval")
    if args.seeds is not None:
        try:
            seeds = seeds_cli.parse_seeds(args.seeds)
        except ValueError as error:
            parser.error(str(error))
        clashing = [flag for flag in ("--seed", "--nproc") if any(t == flag or t.startswith(flag + "=") for t in rest)]
        if clashing:
            parser.error(f"--seeds runs one process per seed: drop {' and '.join(clashing)}")
        return seeds_cli.run_side_by_side(seeds, args.out,
                                          [*(["--eval"] if args.eval else []), "--preset", args.preset, *rest])
    train_argv = run_train_argv(args.out, args.preset, rest)
    print("gpu_walk: unilab-train " + " ".join(train_argv), flush=True)
    code = train_cli.main(train_argv)
    if code != 0 or not args.eval:
        return code
    def judge(folder: str, *flags: str) -> int:
        eval_argv = ["--checkpoint", str(args.out / "run"), "--out", str(args.out / folder), *flags, *eval_options]
        print("gpu_walk: unilab-eval " + " ".join(eval_argv), flush=True)
        return eval_cli.main(eval_argv)

    code = judge("eval")
    if code in (0, EXIT_FAILED) and kept_averaged_policy(args.out / "run"):
        # The average is what acts and what the exit code reports; the latest actor is judged
        # beside it so the run itself says whether the average pays.
        latest_code = judge("eval-latest-actor", "--latest-actor")
        if latest_code not in (0, EXIT_FAILED):
            return latest_code
    return code


def run_train_argv(out: Path, preset: str, rest: list[str]) -> list[str]:
    """unilab-train's argv for one run into ``out``: the fixed layout, then the flags and overrides
    given (``eval.`` tokens are the evaluation's and are left out)."""
    rest = [token for token in rest if not token.startswith("eval.")]
    return ["--preset", preset, "--out", str(out / "run"), "--curve-json", str(out / "curve.json"),
            "--summary-json", str(out / "summary.json"), "--no-progress", *rest]


def train_argv_of(argv: list[str]) -> list[str]:
    """The unilab-train argv that ``main(argv)`` (one run, no ``--seeds``) would train with, so a
    caller can check a command it is about to start exactly as that run will read it."""
    args, rest = build_parser().parse_known_args(argv)
    return run_train_argv(args.out, args.preset, rest)


def kept_averaged_policy(run: Path) -> bool:
    """Whether the run in ``run`` kept an averaged policy, by its record (which carries the
    same ``algo_config`` as its checkpoints)."""
    return acting_actor(json.loads((run / "run.json").read_text())) == "averaged"


if __name__ == "__main__":
    sys.exit(main())
