"""``unilab-eval``: the task's own evaluation of a checkpoint's deterministic policy.

    unilab-eval --checkpoint runs/walk/checkpoint.pt|runs/walk [--backends mjwarp,mujoco] [--out DIR] [eval.KEY=VALUE ...] [key=value ...]
    unilab-eval --policy runs/walk/policy.onnx [--backends mujoco] [--out DIR] ...

The checkpoint's task names its evaluation protocol (``unilab.evaluation``): for a velocity
task a sweep of fixed commands, each from a standing start. The protocol runs on the task's
play variant (no observation noise, pushes or curriculum) with the checkpoint's env
overrides, then the ``key=value`` overrides given here (e.g. a different evaluation variant
with ``--task``). A training override of a term the play variant removed (a curriculum stage, a
push interval) is dropped and listed in the report, as is a training ``episode_length_s`` (the play
variant's episodes outlast the protocol: a time-out would reset a row mid-case and hide a fall);
``eval.KEY=VALUE`` changes a parameter of the protocol itself (e.g.
``eval.envs_per_command=4 eval.seconds=3`` for a quick look; the report records them). With several ``--backends`` the same protocol, commands and seed run on
each (sim-to-sim), one table. Writes ``report.json`` and ``report.png`` under ``--out``.

``--checkpoint RUN_DIR`` judges a whole run: the snapshots ``runner.snapshot_at_s`` kept
(``checkpoint-<S>s.pt``) and those of ``runner.snapshot_at_steps`` (``checkpoint-<N>steps.pt``),
then the final ``checkpoint.pt``, in training order (by the env steps each holds), each on fresh
envs from the same seed. Each gets ``OUT/<checkpoint name>/report.json``; ``OUT/over-time.json``
and the printed table give the cases passed against training time and env steps (a single
checkpoint's report is ``OUT/report.json``, and ``over-time.json`` has its one row).

A run that kept an averaged policy (``averaged_policy_tau`` > 0) is judged by that average, what
``unilab-play`` and ``unilab-export`` use too; ``--latest-actor`` judges its latest actor instead,
so one run can compare the two. Reports name the actor they judged.

``--mirror-averaged`` judges the policy made left-right symmetric: each step it acts with the mean
of its action and the mirror of the action it takes in the mirrored world
(``unilab_rl.symmetry.mirror_averaged``), which cancels whatever it does on one side only (a turn
to the left whatever it is asked). It needs a task that declares its mirror (``env.mirrors``) and
acts twice per step; reports and the printed line say so (``mirror_averaged``), as they do for a
policy exported with ``unilab-export --mirror-averaged``, which acts so without the flag.

``--policy FILE`` judges an exported policy (``unilab-export``: ONNX or TorchScript) instead, the
file a deployment runs: the env comes from its metadata's task and env overrides, which must
still have the fingerprint they had at export (else the task's meaning has changed since, and
the figures would not be the policy's), and the env's policy observations must have the
metadata's layout. The default backend is the one the policy trained on. ``--policy DIR`` judges
the folder ``unilab-export --checkpoint RUN_DIR`` wrote (``policy-<S>s.<ext>``, ``policy-<N>steps.<ext>``,
then ``policy.<ext>``), as a run directory's checkpoints are.

Exit codes: 0 every backend's evaluation passed (of a run directory: the last checkpoint's), 1 it
ran and some case failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from unilab_rl.checkpoint import CheckpointError
from unilab_rl.cli.judged import Judged, judged_checkpoints, judged_exports
from unilab_rl.cli.metrics_sink import write_json_atomic
from unilab_rl.cli.overrides import Namespace, env_namespace, parse_tokens, route
from unilab_rl.cli.run_dir import check_writable
from unilab_rl.cli.summary import warn_altered_physics
from unilab_rl.cli.trained_env import build_env
from unilab_rl.export import ExportError
from unilab_rl.symmetry import declared_mirrors, mirror_averaged

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
# Env settings the evaluation's play variant fixes for its protocol, whatever the training run
# set: a training run's short episodes would time rows out mid-case, reset them and have their
# restarted state measured (a fall hidden by a time-out).
PROTOCOL_SETTINGS = ("episode_length_s",)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-eval",
                                     description="Run the task's evaluation of a checkpoint or an exported policy.",
                                     epilog=f"Exit codes: 0 passed on every backend (of several checkpoints, the "
                                            f"last), {EXIT_FAILED} a case failed, {EXIT_BAD_INPUT} bad input.")
    judged = parser.add_mutually_exclusive_group(required=True)
    judged.add_argument("--checkpoint", type=Path,
                        help="a checkpoint file, or a run directory (its snapshots, then checkpoint.pt)")
    judged.add_argument("--policy", type=Path,
                        help="an exported policy (unilab-export: policy.onnx or policy.pt) with its metadata, or a "
                             "folder of them (policy-<S>s.onnx ..., then policy.onnx)")
    parser.add_argument("--task", help="evaluate on this task's protocol (default: the checkpoint's task)")
    parser.add_argument("--backends", help="comma-separated backends (default: the one the checkpoint trained on)")
    parser.add_argument("--device", default=None, help="torch device of the env and the policy (default: the env "
                                                         "decides; the one GPU if visible)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the evaluation's envs (default 1)")
    parser.add_argument("--out", type=Path, help="write report.json and report.png here")
    parser.add_argument("--no-plot", action="store_true", help="write report.json only (no matplotlib needed)")
    parser.add_argument("--latest-actor", action="store_true",
                        help="judge a checkpoint's latest actor where its run also kept an averaged policy "
                             "(averaged_policy_tau), which is judged by default")
    parser.add_argument("--mirror-averaged", action="store_true",
                        help="judge the policy averaged with its own left-right mirror (needs a task that "
                             "declares its mirror)")
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="env overrides on top of the checkpoint's (env.KEY=VALUE or KEY=VALUE, e.g. "
                             "env.episode_length_s=30); eval.KEY=VALUE sets a parameter of the evaluation protocol")
    return parser


def evaluate(args: argparse.Namespace) -> int:
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    if args.out is not None:  # a folder for report.json: checked before anything is loaded, not after the run
        check_writable(args.out, "--out")
    parse_tokens(args.overrides)  # malformed tokens fail before anything is loaded
    if args.latest_actor and args.policy is not None:
        raise ValueError("--latest-actor: only for --checkpoint (an exported policy holds one actor)")
    subjects = (judged_checkpoints(args.checkpoint, args.latest_actor) if args.policy is None
                else judged_exports(args.policy))
    first = subjects[0]
    # env.<key> (or a bare key): an env override on the task the protocol runs on; eval.<key>: a protocol option.
    evaluated_on = task_evaluation(args.task or first.task).task
    routed = route(args.overrides, [env_namespace(evaluated_on), Namespace("eval", "evaluation", None, bare=False)])
    options = routed["eval"]
    evaluation = task_evaluation(args.task or first.task, options)
    backends = [b.strip() for b in (args.backends or first.backend).split(",") if b.strip()]
    if not backends or len(set(backends)) != len(backends):
        raise ValueError(f"--backends {args.backends!r}: expected distinct comma-separated backend names")
    overrides, dropped = _env_overrides(evaluation.task, first.env_overrides, routed["env"])
    evaluation = evaluation.fitted(task_config(evaluation.task, overrides))
    over_time = []
    for subject in subjects:
        reports = _judge(subject, evaluation, backends, overrides, args)
        out = args.out  # one report folder per checkpoint when several are judged
        if out is not None and len(subjects) > 1:
            out = out / subject.path.stem
        trained_s = "?" if subject.wall_s is None else f"{subject.wall_s:.0f}"
        mirrored = args.mirror_averaged or subject.mirror_averaged
        acted = f"{subject.actor} actor" + (", mirror-averaged" if mirrored else "")
        print(f"unilab-eval: {subject.path} ({subject.task}, {subject.algo}, {acted}, "
              f"{subject.env_steps} env steps, {trained_s} s of training) on {evaluation.task}")
        for backend, report in reports.items():
            print(f"  {backend}: {'PASSED' if report['passed'] else 'FAILED'}{_overall_figures(report)}")
            for case in report["cases"]:
                print("    " + evaluation.summary_line(case))
            warn_altered_physics(report["simulator"], evaluation.num_envs(), "unilab-eval",
                                 str(out / "report.json") if out is not None else "the report (--out)")
        over_time.append({"checkpoint": subject.path.name, "actor": subject.actor,
                          "mirror_averaged": mirrored, "trained_wall_s": subject.wall_s,
                          "trained_env_steps": subject.env_steps,
                          **{backend: _over_time_cell(r) for backend, r in reports.items()}})
        if out is not None:
            write_json_atomic(out / "report.json", {
                subject.kind: str(subject.path), "task": subject.task, "evaluated_on": evaluation.task,
                "algo": subject.algo, "actor": subject.actor, "mirror_averaged": mirrored,
                "trained_env_steps": subject.env_steps,
                "trained_wall_s": subject.wall_s, "env_overrides": overrides,
                "training_overrides_dropped": dropped, "evaluation_options": options, "seed": args.seed,
                "reports": reports})
            if not args.no_plot:
                evaluation.plot(reports, out / "report.png")
            print(f"unilab-eval: wrote {out / 'report.json'}" + ("" if args.no_plot else " and report.png"))
    if len(subjects) > 1:
        print("unilab-eval: over training time")
        for row in over_time:
            cells = "  ".join(f"{b}: {row[b]['cases_passed']}/{row[b]['cases']} passed"
                              + _overall_figures(row[b]) for b in backends)
            trained_s = "?" if row["trained_wall_s"] is None else f"{row['trained_wall_s']:.0f}"
            print(f"  {row['checkpoint']:24s} {trained_s:>7s} s {row['trained_env_steps']:>12d} env steps  "
                  f"{cells}")
    if args.out is not None:  # one file to read a run by, however many checkpoints it kept
        judged = {"run": None if args.checkpoint is None else str(args.checkpoint),  # null for --policy, not "None"
                  "policy": None if args.policy is None else str(args.policy)}
        write_json_atomic(args.out / "over-time.json", {**judged, "evaluated_on": evaluation.task,
                                                        "seed": args.seed, "checkpoints": over_time})
    last = over_time[-1]
    return 0 if all(last[b]["passed"] for b in backends) else EXIT_FAILED


def _overall_figures(report: dict[str, Any]) -> str:
    """A report's (or an over-time cell's) ``overall`` figures as " name value" pairs."""
    return "".join(f" {k} {v:.4g}" for k, v in report.get("overall", {}).items())


def _over_time_cell(report: dict[str, Any]) -> dict[str, Any]:
    """One checkpoint on one backend: cases passed, and the protocol's overall figures when it
    has them (tracking: success rate, MPKPE, ...; the velocity sweep: its yaw-rate offset)."""
    cell = {"passed": report["passed"], "cases_passed": sum(c["passed"] for c in report["cases"]),
            "cases": len(report["cases"])}
    if "overall" in report:
        cell["overall"] = report["overall"]
    return cell


def _env_overrides(task: str, trained: dict[str, Any], given: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The checkpoint's env overrides on the evaluation task, then those given here.

    A training override of a term or entry the play variant removed (a curriculum stage, a
    push's interval, a reset's noise range) has nothing to act on there; it is dropped and the report lists it. So is one of
    the settings the protocol owns (``PROTOCOL_SETTINGS``). Overrides given here are not: a key
    that misses is an error, as for any env."""
    from unilab.config import task_overrides
    from unilab.config_overrides import overrides_without_target
    from unilab.registry import task_config

    trained = task_overrides(trained)  # how the training env ran (CUDA graphs, checks) is decided here
    dropped = overrides_without_target(task_config(task), trained)
    dropped += [k for k in trained if k in PROTOCOL_SETTINGS and k not in dropped]
    overrides = {**{k: v for k, v in trained.items() if k not in dropped}, **given}
    if dropped:
        print(f"unilab-eval: training overrides not in {task} or set by its evaluation, dropped: {', '.join(dropped)}",
              flush=True)
    return overrides, dropped


def _judge(subject: Judged, evaluation: Any, backends: list[str], overrides: dict[str, Any],
           args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """One policy's evaluation on each backend, each on an env of its own from the same seed."""
    from unilab import make_manager_based_rl_env

    reports: dict[str, dict[str, Any]] = {}
    for backend in backends:
        # Said up front: a backend's first build may compile kernels (Genesis: minutes on a CPU).
        print(f"unilab-eval: building {evaluation.num_envs()} envs of {evaluation.task} on {backend}", flush=True)
        env = build_env(make_manager_based_rl_env, evaluation.task, {"validate_actions": False, **overrides},
                        backend=backend, num_envs=evaluation.num_envs(), device=args.device, seed=args.seed)
        try:
            # With the simulator's own facts at the end (the backend's keys): whether it altered
            # any world's physics, and how it stepped (a backend that could not capture its step
            # graph steps eagerly and says why).
            # An export that averages inside its graph is not averaged again (it would act the same).
            average_here = args.mirror_averaged and not subject.mirror_averaged
            reports[backend] = {**evaluation.run(env, _acting(subject, env, evaluation.task, average_here)),
                                "simulator": env.simulator_diagnostics()}
        finally:
            env.close()
    return reports


def _acting(subject: Judged, env: Any, task: str, mirrored: bool) -> Any:
    """How ``subject`` acts on ``env`` (of ``task``): as trained, or averaged with its own mirror."""
    if not mirrored:
        return subject.acting(env)
    return mirror_averaged(subject.acting(env), declared_mirrors(env, task))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return evaluate(args)
    except (ValueError, KeyError, CheckpointError, ExportError) as error:  # the factory's and the registry's too
        print(f"unilab-eval: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
