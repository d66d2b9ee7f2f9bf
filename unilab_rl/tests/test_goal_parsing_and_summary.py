"""Goals: how a goal's text is parsed and refused, when a run's goals are met, and what the
summary counts. Each test names the small change to ``goals.py`` it fails on."""

from __future__ import annotations

import pytest
from unilab_rl.goals import Goal, GoalError, GoalTracker

LOSS = "loss/critic/loss"


@pytest.mark.parametrize("text", [f" {LOSS} <= 0.25 ", f"{LOSS}<= 0.25", f"{LOSS} <=0.25", f"\t{LOSS}<=0.25"])
def test_a_goal_may_be_written_with_spaces_around_its_parts(text):
    # (mutants: the ``\s*`` before the name, or around the comparison, dropped from the pattern)
    assert Goal.parse(text) == Goal(LOSS, "<=", 0.25)


def test_a_metric_name_with_a_space_inside_is_refused():
    with pytest.raises(GoalError, match="expected NAME<VALUE"):
        Goal.parse("loss critic<0.25")


@pytest.mark.parametrize("value", ["nan", "NaN", "-inf", "inf", "1e400", "-1e400"])
def test_a_threshold_that_is_not_finite_is_refused(value):
    # (mutants: the NaN test dropped; only +inf refused). float() reads all of these, and a NaN
    # threshold would make the goal silently unmeetable.
    with pytest.raises(GoalError, match="the threshold must be finite"):
        Goal.parse(f"{LOSS}<{value}")


def test_a_run_without_goals_does_not_report_its_goals_met():
    # (mutant: ``bool(self.goals) and`` dropped: ``all([])`` is True)
    tracker = GoalTracker([])
    tracker.observe(10.0, {LOSS: 0.1})
    summary = tracker.summary()
    assert summary["goals_met_at_end"] is False and summary["first_goals_met_wall_s"] is None
    assert summary["goals"] == [] and summary["goal_values_at_end"] == {}


def test_a_goal_whose_metric_was_never_logged_is_not_met():
    tracker = GoalTracker([Goal.parse(f"{LOSS}<0.5")])
    tracker.observe(10.0, {"loss/actor/loss": 0.1})
    summary = tracker.summary()
    assert summary["goals_met_at_end"] is False and summary["goal_values_at_end"] == {LOSS: None}


def test_the_summary_counts_the_intervals_observed():
    # (mutant: ``self.intervals += 1`` dropped)
    tracker = GoalTracker([Goal.parse(f"{LOSS}<0.5")])
    for k in range(3):
        tracker.observe(float(k), {} if k == 1 else {LOSS: 1.0})  # an interval without the metric counts too
    assert tracker.summary()["intervals"] == 3


def test_a_summary_is_a_snapshot_that_later_intervals_do_not_change():
    # (mutant: ``"final": dict(self.last)`` -> ``self.last``, the tracker's own dict)
    tracker = GoalTracker([Goal.parse(f"{LOSS}<0.5")])
    tracker.observe(1.0, {LOSS: 0.4})
    early = tracker.summary()
    tracker.observe(2.0, {LOSS: 0.9, "loss/actor/loss": 3.0})
    assert early["final"] == {LOSS: 0.4}
    assert early["goal_values_at_end"] == {LOSS: 0.4} and early["goals_met_at_end"] is True
    assert tracker.summary()["final"] == {LOSS: 0.9, "loss/actor/loss": 3.0}
