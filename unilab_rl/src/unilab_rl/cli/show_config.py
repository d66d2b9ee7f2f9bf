"""``unilab-train --show-config``: the resolved configuration of a command, printed without
building an env: task, backend, the algorithm's fields and the runner's with their values
(after the preset, ``--config`` record, ``--resume`` checkpoint and overrides), the env
overrides. ``--help`` lists the flags; this lists what ``algo.<field>``, ``runner.<field>``
and ``env.<key>`` set."""

from __future__ import annotations

import argparse
from typing import Any

from unilab_rl.cli.train_args import DEFAULT_STEPS


def resolved_config_text(args: argparse.Namespace, plan: dict[str, Any]) -> str:
    budget = f"--steps {args.steps}" if args.steps is not None else (
        f"--minutes {args.minutes:g}" if args.minutes is not None else f"--steps {DEFAULT_STEPS} (the default)")
    lines = [f"task: {args.task}", f"backend: {args.backend}", f"algo: {args.algo}", f"num_envs: {args.num_envs}",
             f"seed: {args.seed}", f"device: {args.device or 'the env decides'}", f"budget: {budget}",
             f"preset: {args.preset or 'none'}", "", f"algorithm config ({args.algo}; set with algo.<field>=VALUE):"]
    lines += [f"  {key} = {value!r}" for key, value in plan["algo_config"].model_dump().items()]
    lines += ["", "runner config (runner.<field>=VALUE):"]
    lines += [f"  {key} = {value!r}" for key, value in plan["runner_config"].model_dump().items()]
    env = plan["env_overrides"]
    lines += ["", "env overrides (env.<dotted key of the task's config>=VALUE):" + ("" if env else " none")]
    lines += [f"  {key} = {value!r}" for key, value in env.items()]
    return "\n".join(lines)
