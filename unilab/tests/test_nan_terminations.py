"""A world whose simulation diverged (NaN state) ends its episode through the task's own
terminations, instead of running NaN until its time-out: every limit is written "not within"."""

from __future__ import annotations

import math
from types import SimpleNamespace

import torch
from unilab.terms.terminations import bad_orientation, base_height_below

NAN = float("nan")


def test_the_walking_terminations_end_a_nan_world_and_only_it():
    robot = SimpleNamespace(projected_gravity_b=torch.tensor([[0.0, 0.0, -1.0], [NAN, NAN, NAN], [0.0, 0.0, 0.0]]),
                            root_pos_w=torch.tensor([[0.0, 0.0, 0.8], [NAN, NAN, NAN], [0.0, 0.0, 0.2]]))
    env = SimpleNamespace(robot=robot)
    assert bad_orientation(env, math.radians(70.0)).tolist() == [False, True, True]
    assert base_height_below(env, 0.35).tolist() == [False, True, True]


def test_the_tracking_terminations_end_a_nan_world_and_only_it(make_env):
    env = make_env(task="g1_motion_tracking", num_envs=3)
    term = env.termination_manager
    fused = next(t for t in term.terms if t.components is not None)
    command = env.command_manager.term("motion")
    pos, quat = command.errors()
    diverged = SimpleNamespace(
        errors=lambda: (torch.where(torch.arange(3)[:, None, None] == 1, NAN, pos * 0.0), quat),
        ref_anchor_quat_w=command.ref_anchor_quat_w,
        robot_anchor_quat_w=torch.where(torch.arange(3)[:, None] == 1, NAN, command.ref_anchor_quat_w),
        at_clip_end=lambda: torch.zeros(3, dtype=torch.bool))
    fused.obj.command = diverged
    fired = fused.fn(env)
    assert fired[:, :3].tolist() == [[False] * 3, [True] * 3, [False] * 3]
