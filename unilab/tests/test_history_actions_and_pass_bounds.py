"""Observation history order, action clipping before scaling, and the evaluations' pass criteria at
their bounds (the velocity sweep's fall rate, error and settle window; the tracking evaluation's
success, error and unscored end step). Each test fails on one small, deliberate change to the
code it names (recorded beside it) and passes on the code as written."""

from __future__ import annotations

import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets.motion.io import save_clip
from unilab.tasks.tracking.evaluation import MotionEvaluation, MotionEvaluationCfg
from unilab.tasks.velocity.evaluation import VelocitySweep, VelocitySweepCfg

N = 4
NO_NOISE = {"observations.policy.enable_corruption": False}


# ---- observation history: oldest frame first, newest last -------------------------------------
# (mutant: the new frame put at the front of the stack instead of the back)

def test_history_stacks_the_last_frames_oldest_first(make_env):
    stacked = make_env(overrides={**NO_NOISE, "observations.policy.history_length": 3})
    single = make_env(overrides=NO_NOISE)
    d = single.observation_spec["policy"]
    frames = [single.reset()["policy"]]
    stacked.reset()
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        action = 0.3 * torch.randn(N, single.action_dim, generator=g)
        frames.append(single.step(action)[0]["policy"])
        obs = stacked.step(action)[0]["policy"].view(N, 3, d)
    assert not torch.equal(frames[-1], frames[-2]) and not torch.equal(frames[-2], frames[-3])
    for k in range(3):  # slot 0 the oldest, slot 2 this step's frame
        assert torch.equal(obs[:, k], frames[k - 3])


# ---- action manager: ctrl = offset + scale * clip(action) -------------------------------------
# (mutant: the configured clip ignored)

def test_actions_are_clipped_before_they_are_scaled(make_env):
    env = make_env(overrides={"actions.clip": [-0.5, 0.5]})
    am = env.action_manager
    action = torch.zeros(N, env.action_dim)
    action[0], action[1], action[2] = 2.0, -3.0, 0.25
    ctrl = am.process(action).clone()
    expected = am.offset + am.scale * torch.tensor([0.5, -0.5, 0.25, 0.0])[:, None]
    assert torch.allclose(ctrl, expected)


# ---- velocity sweep: the pass criteria at their bounds ----------------------------------------
# (mutants: ``fall_rate < max`` -> ``<=``; ``lin_vel_error <= max`` -> ``<``)

def _velocity_sweep(**kw) -> VelocitySweep:
    cfg = {"task": "g1_walk_flat_play", "command_name": "twist", "commands": [(0.5, 0.0, 0.0), (0.5, 0.0, 0.0)],
           "training_range": ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)), "envs_per_command": 2, "seconds": 3.0,
           "settle_s": 0.5, **kw}
    return VelocitySweep(VelocitySweepCfg(**cfg))


def test_a_fall_rate_equal_to_the_maximum_fails_and_an_error_equal_to_the_maximum_passes():
    sweep = _velocity_sweep(max_fall_rate=0.5, max_lin_vel_error=0.25)
    commands = torch.tensor([[0.5, 0.0, 0.0]] * 4)
    fell = torch.tensor([False, True, False, False])
    mean_twist = torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.75, 0.0, 0.0], [0.5, 0.25, 0.0]])
    report = sweep._report(commands, fell, mean_twist, torch.zeros(4), torch.zeros(4), 3.0)
    falls, at_bound = report["cases"]
    assert falls["fall_rate"] == 0.5 and falls["lin_vel_error"] == 0.0 and not falls["passed"]
    assert at_bound["fall_rate"] == 0.0 and at_bound["lin_vel_error"] == 0.25 and at_bound["passed"]


# ---- velocity sweep: the measurement window starts at settle_s --------------------------------
# (mutant: ``k >= settle`` -> ``k > settle``)

def test_the_achieved_twist_is_the_mean_over_the_steps_from_settle_s_to_the_end(make_env):
    sweep = _velocity_sweep(seconds=0.4, settle_s=0.2)  # a zero action stays up for about 1.4 s
    env = make_env(task="g1_walk_flat_play", num_envs=sweep.num_envs())
    twists = []
    real_step = env.step

    def step(action):
        out = real_step(action)
        robot = env.robot
        twists.append(torch.cat((robot.root_lin_vel_b[:, :2], robot.root_ang_vel_b[:, 2:]), dim=1).clone())
        return out

    env.step = step
    report = sweep.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
    steps, settle = len(twists), round(0.2 / env.step_dt)
    assert steps == round(0.4 / env.step_dt) and [c["fall_rate"] for c in report["cases"]] == [0.0, 0.0]
    window = torch.stack(twists[settle:]).mean(0)  # (envs, 3)
    for i, case in enumerate(report["cases"]):
        expected = window[2 * i:2 * i + 2].mean(0)
        assert case["achieved"] == pytest.approx(expected.tolist(), abs=1e-6)


# ---- tracking evaluation: a clip passes on success AND error, success inclusive ---------------
# (mutants: ``success >= min_success`` -> ``>``; ``and`` -> ``or``)

def test_a_clip_passes_only_with_enough_success_and_a_small_enough_error():
    evaluation = MotionEvaluation(MotionEvaluationCfg(task="t", command_name="motion", envs_per_clip=2,
                                                      min_success=0.5, max_mpkpe_mm=40.0), num_clips=3)
    clips = torch.tensor([0, 0, 1, 1, 2, 2])
    succeeded = torch.tensor([True, False, True, True, False, False])
    mpkpe_m = torch.tensor([0.03, 0.03, 0.05, 0.05, 0.01, 0.01])
    means = torch.stack((mpkpe_m, mpkpe_m, torch.zeros(6), torch.zeros(6)), dim=1)
    report = evaluation._report(["at_bound", "too_far", "all_fell"], clips, succeeded, means,
                                torch.zeros(6, 4), torch.zeros(6, 4))
    at_bound, too_far, all_fell = report["cases"]
    assert at_bound["success_rate"] == 0.5 and at_bound["passed"]  # success == min_success passes
    assert too_far["success_rate"] == 1.0 and not too_far["passed"]  # 50 mm > 40 mm
    assert all_fell["mpkpe_mm"] == pytest.approx(10.0) and not all_fell["passed"]
    assert report["passed"] is False


# ---- tracking evaluation: the step that ends an episode is not scored -------------------------
# (mutant: ``counted = running`` instead of ``running & ~ended``)

def test_the_error_quarters_score_the_clips_steps_before_its_end_and_not_the_reset_state(make_env, tmp_path):
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    clip = str(save_clip(synthetic_clip(frames=6, name="fk_tiny"), tmp_path / "fk_tiny.npz"))
    overrides = {"commands.motion.clips": [clip]}
    evaluation = task_evaluation("g1_motion_tracking", {"envs_per_clip": 2})
    evaluation = evaluation.fitted(task_config(evaluation.task, overrides))
    env = make_env(task=evaluation.task, num_envs=evaluation.num_envs(), overrides=overrides)
    motion = env.command_manager.term("motion")
    per_step = []  # (mean body position error over the envs, whether any env ended)
    real_step = env.step

    def step(action):
        out = real_step(action)
        ref = motion.state_frame("body_pos")[0].view(motion.robot_body_pos_w.shape)
        err = torch.linalg.vector_norm(motion.robot_body_pos_w - ref, dim=-1).mean()
        per_step.append((float(err), bool((out[2] | out[3]).any())))
        return out

    env.step = step
    report = evaluation.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
    (case,) = report["cases"]
    # 6 frames: 4 scored steps, one per quarter; the 5th reaches the last frame and ends the
    # episode (the 6th, of the next episode, is past the clip's run).
    assert [ended for _, ended in per_step] == [False] * 4 + [True, False]
    assert case["success_rate"] == 1.0
    assert case["mpkpe_mm_by_quarter"] == pytest.approx([1e3 * e for e, _ in per_step[:4]], rel=1e-4)
    assert case["mpkpe_mm"] == pytest.approx(1e3 * sum(e for e, _ in per_step[:4]) / 4, rel=1e-4)
