"""The task-record gate passes on the recorded tasks and names what a planted change changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from unilab_gates.task_records import check_tasks

ROOT = Path(__file__).resolve().parents[2]


def test_every_builtin_task_matches_its_record():
    pytest.importorskip("unilab")
    assert check_tasks(ROOT) == []


def test_a_planted_semantic_change_fails_naming_the_changed_key(monkeypatch):
    pytest.importorskip("unilab")
    from unilab import registry

    original = registry.task_config("g1_motion_tracking")  # loads the built-in owners

    def planted():
        cfg = original.model_copy(deep=True)
        cfg.rewards["tracking"].weights["body_pos"] = 2.0
        return cfg

    monkeypatch.setitem(registry._TASKS, "g1_motion_tracking", planted)
    errors = check_tasks(ROOT, tasks=["g1_motion_tracking"])
    assert len(errors) == 1
    assert "g1_motion_tracking: its semantics changed" in errors[0]
    assert "rewards.tracking.weights.body_pos" in errors[0]


def test_how_the_env_runs_is_not_part_of_a_tasks_fingerprint():
    pytest.importorskip("unilab")
    from unilab.fingerprint import task_fingerprint

    base = task_fingerprint("g1_walk_flat")
    assert task_fingerprint("g1_walk_flat", {"cuda_graph": True, "validate_actions": False,
                                             "profile_phases": True}) == base
    assert task_fingerprint("g1_walk_flat", {"episode_length_s": 10.0}) != base
