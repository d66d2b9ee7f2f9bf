"""Training goals as data: a logged metric, a comparison and a threshold.

A goal is written ``NAME<VALUE``, ``NAME<=VALUE``, ``NAME>VALUE`` or ``NAME>=VALUE``, where
NAME is a key the runner logs (``collector/episode_length_fraction``, a learner's
``loss/critic/loss``, or a metric the task declares under ``env/``, e.g.
``env/metrics/twist/lin_vel_error``). The tracker
reads every log interval; a metric missing from an interval keeps its last value (episode
statistics exist only for intervals in which episodes ended), and a goal whose metric was
never logged is not met.
"""

from __future__ import annotations

import operator
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}
_GOAL = re.compile(r"^\s*(?P<metric>[^<>=\s]+)\s*(?P<op><=|>=|<|>)\s*(?P<value>\S+)\s*$")


class GoalError(ValueError):
    pass


@dataclass(frozen=True)
class Goal:
    metric: str
    op: str
    threshold: float

    @classmethod
    def parse(cls, text: str) -> Goal:
        match = _GOAL.match(text)
        if match is None:
            raise GoalError(f"--goal {text!r}: expected NAME<VALUE, NAME<=VALUE, NAME>VALUE or NAME>=VALUE")
        try:
            threshold = float(match["value"])
        except ValueError:
            raise GoalError(f"--goal {text!r}: the threshold {match['value']!r} is not a number") from None
        if threshold != threshold or threshold in (float("inf"), float("-inf")):
            raise GoalError(f"--goal {text!r}: the threshold must be finite")
        return cls(match["metric"], match["op"], threshold)

    def met(self, value: float | None) -> bool:
        return value is not None and _OPS[self.op](value, self.threshold)

    def __str__(self) -> str:
        # The shortest text that reads back as the same number: run.json keeps goals as text,
        # and --config reads them again (":g" rounded 1234567 to 1.23457e+06).
        exact = int(self.threshold) if float(self.threshold).is_integer() else self.threshold
        return f"{self.metric}{self.op}{exact!r}"


def check_known(goals: Iterable[Goal], known: Iterable[str], open_prefixes: tuple[str, ...] = ()) -> None:
    """Refuse a goal on a metric the run will never log, listing those it will. A name under one
    of ``open_prefixes`` is taken unchecked: those metrics are named only as the run logs them
    (an env's curriculum state and phase timings, its step log)."""
    known = sorted(set(known))
    for goal in goals:
        if goal.metric not in known and not goal.metric.startswith(open_prefixes):
            raise GoalError(f"--goal {goal}: unknown metric {goal.metric!r}; a goal takes one of {known}"
                            + (f" or a name under {list(open_prefixes)}" if open_prefixes else ""))


class GoalTracker:
    """Follows the logged intervals: when all goals were first met, whether they hold at
    the end, and the median env-steps/s of the intervals in which the learner ran."""

    def __init__(self, goals: list[Goal]) -> None:
        self.goals = goals
        self.last: dict[str, float] = {}
        self.first_met_wall_s: float | None = None
        self.intervals = 0
        self.learning_rates: dict[str, list[float]] = {}
        self.rates: list[float] = []  # perf/env_steps_per_s of every interval (the closing line's median)

    def all_met(self) -> bool:
        return bool(self.goals) and all(g.met(self.last.get(g.metric)) for g in self.goals)

    def observe(self, wall_s: float, metrics: dict[str, float]) -> None:
        self.intervals += 1
        self.last.update(metrics)
        if self.first_met_wall_s is None and self.all_met():
            self.first_met_wall_s = wall_s
        if "perf/env_steps_per_s" in metrics:
            self.rates.append(metrics["perf/env_steps_per_s"])
        if metrics.get("progress/updates", 0) > 0:
            # The first learning interval also holds compiles and graph captures; the median
            # discounts it.
            for key in ("perf/env_steps_per_s", "perf/env_steps_per_s_all_ranks"):
                if key in metrics:
                    self.learning_rates.setdefault(key, []).append(metrics[key])

    def summary(self) -> dict[str, Any]:
        return {
            "goals": [str(g) for g in self.goals],
            "goals_met_at_end": self.all_met(),
            "first_goals_met_wall_s": self.first_met_wall_s,
            "goal_values_at_end": {g.metric: self.last.get(g.metric) for g in self.goals},
            **{f"median_{key.removeprefix('perf/')}_learning": statistics.median(v)
               for key, v in self.learning_rates.items()},
            "intervals": self.intervals,
            "final": dict(self.last),
        }
