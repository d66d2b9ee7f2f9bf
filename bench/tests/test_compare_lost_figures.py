"""compare: a gate whose figure the head no longer reports is not passed unchecked."""

from __future__ import annotations

import pytest
from unilab_bench import compare

CASE = "flashsac/g1_walk_flat/mjwarp"


def _side(**figures):
    return {"status": "ok", "smoke": False, "samples": [
        {"env_steps_per_s_streamed": 1000.0, "reset_done_ms": 1.0, "host_syncs_per_env_step": 0.0,
         "redundant_physics_steps_in_reset": 0.0, **figures} for _ in range(3)]}


@pytest.mark.parametrize("metric", ["env_steps_per_s_streamed", "reset_done_ms", "host_syncs_per_env_step",
                                    "redundant_physics_steps_in_reset"])
def test_a_figure_the_base_has_and_the_head_lost_blocks(metric):
    result = compare.compare_case(CASE, _side(), _side(**{metric: None}), paired=True)
    assert result["verdict"] == compare.BLOCKED, result["why"]
    assert metric in result["why"]


def test_a_figure_an_older_base_lacks_is_still_not_compared():
    result = compare.compare_case(CASE, _side(host_syncs_per_env_step=None), _side(), paired=True)
    assert result["verdict"] == compare.PASS
    assert "host_syncs_per_env_step" not in {m["metric"] for m in result["metrics"]}
