"""``unilab-eval``: the task's own evaluation of a checkpoint's deterministic policy.

    unilab-eval --checkpoint runs/walk/checkpoint.pt [--backends mjwarp,mujoco] [--out DIR] [eval.KEY=VALUE ...] [key=value ...]

The checkpoint's task names its evaluation protocol (``unilab.evaluation``): for a velocity
task a sweep of fixed commands, each from a standing start. The protocol runs on the task's
play variant (no observation noise, pushes or curriculum) with the checkpoint's env
overrides, then the ``key=value`` overrides given here (e.g. a different evaluation variant
with ``--task``). A training override of a term the play variant removed (a curriculum stage, a
push interval) is dropped and listed in the report; ``eval.KEY=VALUE`` changes a parameter of the protocol itself (e.g.
``eval.envs_per_command=4 eval.seconds=3`` for a quick look; the report records them). With several ``--backends`` the same protocol, commands and seed run on
each (sim-to-sim), one table. Writes ``report.json`` and ``report.png`` under ``--out``.

Exit codes: 0 every backend's evaluation passed, 1 it ran and some case failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from unilab_rl.checkpoint import CheckpointError, load_checkpoint
from unilab_rl.cli.metrics_sink import write_json_atomic
from unilab_rl.cli.overrides import parse_tokens
from unilab_rl.cli.play import load_policy

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-eval", description="Run the task's evaluation of a checkpoint.")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--task", help="evaluate on this task's protocol (default: the checkpoint's task)")
    parser.add_argument("--backends", help="comma-separated backends (default: the one the checkpoint trained on)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="write report.json and report.png here")
    parser.add_argument("--no-plot", action="store_true", help="write report.json only (no matplotlib needed)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="env overrides on top of the checkpoint's (e.g. episode_length_s=30); "
                             "eval.KEY=VALUE sets a parameter of the evaluation protocol")
    return parser


def evaluate(args: argparse.Namespace) -> int:
    from unilab.config import overrides_without_target
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    from unilab import make_manager_based_rl_env

    tokens = parse_tokens(args.overrides)
    options = {k.removeprefix("eval."): v for k, v in tokens.items() if k.startswith("eval.")}
    document = load_checkpoint(args.checkpoint)
    evaluation = task_evaluation(args.task or document["task"], options)
    backends = [b.strip() for b in (args.backends or document["backend"]).split(",") if b.strip()]
    if not backends or len(set(backends)) != len(backends):
        raise ValueError(f"--backends {args.backends!r}: expected distinct comma-separated backend names")
    # A training override of a term the play variant removed (a curriculum stage, a push's
    # interval) has nothing to act on there; it is dropped and the report lists it. Overrides
    # given here are not: a key that misses is an error, as for any env.
    trained = document["env_overrides"]
    dropped = overrides_without_target(task_config(evaluation.task), trained)
    overrides = {**{k: v for k, v in trained.items() if k not in dropped},
                 **{k: v for k, v in tokens.items() if not k.startswith("eval.")}}
    if dropped:
        print(f"unilab-eval: training overrides not in {evaluation.task}, dropped: {', '.join(dropped)}", flush=True)
    reports: dict[str, dict[str, Any]] = {}
    for backend in backends:
        # Said up front: a backend's first build may compile kernels (Genesis: minutes on a CPU).
        print(f"unilab-eval: building {evaluation.num_envs()} envs of {evaluation.task} on {backend}", flush=True)
        env = make_manager_based_rl_env(evaluation.task, backend=backend, num_envs=evaluation.num_envs(),
                                        device=args.device, seed=args.seed,
                                        overrides={"validate_actions": False, **overrides})
        try:
            agent = load_policy(document, env)
            reports[backend] = evaluation.run(env, lambda obs: agent.act(obs, deterministic=True))
        finally:
            env.close()
    print(f"unilab-eval: {args.checkpoint} ({document['task']}, {document['algo']}, "
          f"{document['counters']['env_steps']} env steps) on {evaluation.task}")
    for backend, report in reports.items():
        print(f"  {backend}: {'PASSED' if report['passed'] else 'FAILED'}")
        for case in report["cases"]:
            print("    " + evaluation.summary_line(case))
    if args.out is not None:
        document_out = {"checkpoint": str(args.checkpoint), "task": document["task"], "evaluated_on": evaluation.task,
                        "algo": document["algo"], "trained_env_steps": document["counters"]["env_steps"],
                        "env_overrides": overrides, "training_overrides_dropped": dropped,
                        "evaluation_options": options, "seed": args.seed,
                        "reports": reports}
        write_json_atomic(args.out / "report.json", document_out)
        if not args.no_plot:
            evaluation.plot(reports, args.out / "report.png")
        print(f"unilab-eval: wrote {args.out / 'report.json'}" + ("" if args.no_plot else " and report.png"))
    return 0 if all(r["passed"] for r in reports.values()) else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return evaluate(args)
    except (ValueError, KeyError, CheckpointError) as error:  # the factory's and the registry's errors too
        print(f"unilab-eval: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
