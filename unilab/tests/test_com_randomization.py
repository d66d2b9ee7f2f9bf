"""randomize_com: per-env centre-of-mass offsets of named bodies, written through the
backend's declared body_ipos field (g1_motion_tracking_dr moves the torso's)."""

from __future__ import annotations

import pytest
import torch
from unilab.config import EventTermCfg
from unilab.registry import register_task
from unilab.tasks.tracking.config.g1.tracking import g1_motion_tracking
from unilab.terms.events import randomize_com

N = 8
TORSO_RANGE = {"x": (-0.025, 0.025), "y": (-0.05, 0.05), "z": (-0.05, 0.05)}


def test_the_tracking_dr_variant_moves_only_the_torso_centre_of_mass_within_its_ranges(make_env):
    default = make_env(task="g1_motion_tracking", num_envs=N).backend.model_field("body_ipos")
    env = make_env(task="g1_motion_tracking_dr", num_envs=N)
    ipos = env.backend.model_field("body_ipos")
    torso = env.robot.body_index("torso_link", "test")
    offset = ipos[:, torso] - default[:, torso]
    for axis, (lo, hi) in enumerate(TORSO_RANGE.values()):
        assert offset[:, axis].min() >= lo - 1e-6 and offset[:, axis].max() <= hi + 1e-6
        assert offset[:, axis].std() > 0.2 * (hi - lo) / 3.46  # a spread draw per env, not one shared value
    others = [b for b in range(ipos.shape[1]) if b != torso]
    assert torch.equal(ipos[:, others], default[:, others])
    env.step(torch.zeros(N, env.action_dim))


def _task_with_com(params):
    def build():
        cfg = g1_motion_tracking()
        cfg.events["com"] = EventTermCfg(func=randomize_com, mode="startup", params=params)
        return cfg
    return build


@pytest.mark.parametrize(("case", "params", "message"), [
    ("axis", {"bodies": ["torso_link"], "offset_range": {"w": (0.0, 0.1)}}, "expected some of x, y, z"),
    ("param", {"bodies": ["torso_link"], "range": (0.0, 0.1)}, r"unknown params \['range'\]"),
    ("body", {"bodies": ["no_such_body"], "offset_range": {"x": (0.0, 0.1)}}, "no_such_body"),
])
def test_bad_params_are_refused_naming_them(make_env, case, params, message):
    register_task(f"test_bad_com_{case}", _task_with_com(params))
    with pytest.raises((ValueError, KeyError), match=message):
        make_env(task=f"test_bad_com_{case}")


def test_an_unordered_axis_range_is_refused_by_the_config():
    with pytest.raises(ValueError, match="offset_range"):
        EventTermCfg(func=randomize_com, mode="startup",
                     params={"bodies": ["torso_link"], "offset_range": {"x": (0.1, -0.1)}})
