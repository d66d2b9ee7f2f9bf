"""Task evaluations: how a trained policy is judged, declared by the task, run by any caller.

A training curve averages over a command distribution and can pass while part of the range
fails; an evaluation runs the policy deterministically on a fixed protocol (the task's play
variant, fixed commands or clips) and reports per case. A task family provides a
``TaskEvaluation`` and registers it for its owners with ``register_evaluation``; callers
(``unilab-eval``) look it up with ``task_evaluation`` and never know the task.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import torch
from pydantic import BaseModel

Policy = Callable[[dict[str, torch.Tensor]], torch.Tensor]


class TaskEvaluation(Protocol):
    """``task``: the owner the protocol runs on (a play variant: no noise, pushes or
    curriculum). ``num_envs()``: the env count ``run`` expects. ``run(env, policy)``: a
    JSON-able report with at least ``passed`` (bool) and ``cases`` (list of dicts), and
    ``overall`` (name -> number: what the cases add up to) where the protocol has such figures;
    ``unilab-eval`` prints them beside the verdict.
    ``summary_line(case)``: one human-readable line of a case. ``plot(reports, path)``:
    a PNG of reports keyed by a label (e.g. the backend). ``with_options(options)``: the same
    protocol with some of its parameters changed (validated; unknown names are refused).
    ``fitted(env_cfg)``: the protocol for the env config it will run on (``task`` with a run's
    overrides), for a protocol whose cases come from the env (tracking: one per clip of the
    library, which a clip override changes); others return themselves."""

    task: str

    def with_options(self, options: dict[str, Any]) -> TaskEvaluation: ...

    def fitted(self, env_cfg: Any) -> TaskEvaluation: ...

    def num_envs(self) -> int: ...

    def run(self, env: Any, policy: Policy) -> dict[str, Any]: ...

    def summary_line(self, case: dict[str, Any]) -> str: ...

    def plot(self, reports: dict[str, dict[str, Any]], path: Path) -> None: ...


_EVALUATIONS: dict[str, Callable[[], TaskEvaluation]] = {}


def updated_config(cfg: BaseModel, options: dict[str, Any]) -> BaseModel:
    """A copy of an evaluation's pydantic ``cfg`` with ``options`` applied (string values
    parse as Python literals, as on a command line); unknown names are refused."""
    parsed = {}
    for key, value in options.items():
        try:
            parsed[key] = ast.literal_eval(value) if isinstance(value, str) else value
        except (ValueError, SyntaxError):
            parsed[key] = value  # a plain string
    fields = type(cfg).model_fields
    unknown = sorted(set(parsed) - set(fields))
    if unknown:
        raise ValueError(f"evaluation options {unknown} are unknown; valid: {sorted(fields)}")
    return type(cfg).model_validate({**cfg.model_dump(), **parsed})


def register_evaluation(tasks: Iterable[str], build: Callable[[], TaskEvaluation]) -> None:
    """``build()`` returns the evaluation of each of ``tasks`` (owners and their variants)."""
    for task in tasks:
        if task in _EVALUATIONS and _EVALUATIONS[task] is not build:
            raise ValueError(f"task {task!r} already has an evaluation")
        _EVALUATIONS[task] = build


def task_evaluation(task: str, options: dict[str, Any] | None = None) -> TaskEvaluation:
    """The evaluation ``task`` declares, with ``options`` (protocol parameters) applied."""
    from unilab.registry import resolve_task  # loads the owners (and a module:task's): they register theirs

    name = resolve_task(task)
    if name not in _EVALUATIONS:
        raise ValueError(f"task {task!r} declares no evaluation (unilab.evaluation.register_evaluation); tasks "
                         f"with one: {sorted(_EVALUATIONS)}")
    evaluation = _EVALUATIONS[name]()
    return evaluation.with_options(options) if options else evaluation
