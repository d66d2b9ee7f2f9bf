"""The velocity sweep: held commands, what it measures, and when it passes."""

from __future__ import annotations

import pytest
import torch
from unilab.evaluation import task_evaluation
from unilab.tasks.velocity.evaluation import VelocitySweep, VelocitySweepCfg

RANGE = ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))


def _sweep(**kw) -> VelocitySweep:
    cfg = {"task": "g1_walk_flat_play", "command_name": "twist", "commands": [(0.5, 0.0, 0.0), (0.0, 0.0, 1.0)],
           "training_range": RANGE, "envs_per_command": 2, "seconds": 3.0, "settle_s": 0.5, **kw}
    return VelocitySweep(VelocitySweepCfg(**cfg))


def test_a_command_outside_the_training_range_is_refused_naming_the_axis():
    with pytest.raises(ValueError, match=r"vy=0.8 is outside the training range \[-0.5, 0.5\]"):
        _sweep(commands=[(0.0, 0.8, 0.0)])


def test_unknown_protocol_options_are_refused_and_known_ones_apply():
    evaluation = task_evaluation("g1_walk_flat", {"envs_per_command": "3", "seconds": "4"})
    assert evaluation.cfg.envs_per_command == 3 and evaluation.cfg.seconds == 4.0
    assert evaluation.num_envs() == 3 * len(evaluation.cfg.commands)
    with pytest.raises(ValueError, match=r"evaluation options \['envs'\] are unknown"):
        task_evaluation("g1_walk_flat", {"envs": "3"})


def test_held_commands_survive_resets_and_a_fallen_env_counts_as_a_fall(make_env):
    sweep = _sweep()
    env = make_env(task="g1_walk_flat_play", num_envs=sweep.num_envs())
    zero = lambda obs: torch.zeros(env.num_envs, env.action_dim)  # the G1 falls in about 1.4 s
    report = sweep.run(env, zero)
    assert [c["fall_rate"] for c in report["cases"]] == [1.0, 1.0]
    assert report["passed"] is False and report["cases"][0]["achieved"] is None
    twist = env.command_manager.term("twist")
    assert not twist.held  # released after the run
    twist.hold(torch.tensor([[0.5, 0.0, 0.0]] * 2 + [[0.0, 0.0, 1.0]] * 2))
    for _ in range(80):  # falls and resets on the way
        env.step(torch.zeros(env.num_envs, env.action_dim))
    assert torch.equal(twist.command, torch.tensor([[0.5, 0.0, 0.0]] * 2 + [[0.0, 0.0, 1.0]] * 2))


def test_the_torso_tilt_rate_is_measured_on_the_robot_while_it_is_up(make_env):
    sweep = _sweep(seconds=0.6, settle_s=0.2)  # the G1 under a zero action falls after about 1.4 s
    env = make_env(task="g1_walk_flat_play", num_envs=sweep.num_envs())
    report = sweep.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
    tilts = [c["tilt_rate_rms"] for c in report["cases"]]
    assert [c["fall_rate"] for c in report["cases"]] == [0.0, 0.0]
    assert all(0.0 < t < 10.0 for t in tilts)  # a collapsing robot rocks; a wiring slip reads 0 or None


def test_a_case_passes_on_its_mean_velocity_and_fails_on_falls_or_error():
    sweep = _sweep(commands=[(0.5, 0.0, 0.0), (0.5, 0.0, 0.0), (0.0, 0.0, 1.0)], envs_per_command=2)
    commands = torch.tensor([[0.5, 0.0, 0.0]] * 4 + [[0.0, 0.0, 1.0]] * 2)
    fell = torch.tensor([False, False, True, False, False, False])
    mean_twist = torch.tensor([[0.6, 0.0, 0.0], [0.4, 0.1, 0.0],   # within 0.25 m/s: passes
                               [0.0, 0.0, 0.0], [0.5, 0.0, 0.0],   # one of two fell: 50% falls
                               [0.0, 0.0, 0.5], [0.0, 0.0, 0.6]])  # yaw rate off by 0.45 rad/s
    tilt = torch.tensor([0.1, 0.3, 9.0, 0.2, 0.0, 0.0])  # the env that fell is not counted
    report = sweep._report(commands, fell, mean_twist, torch.full((6,), 0.3), tilt, 3.0)
    first, second, third = report["cases"]
    assert first["passed"] and first["lin_vel_error"] == pytest.approx((0.1 + 0.1414214) / 2, abs=1e-5)
    assert first["achieved"] == pytest.approx([0.5, 0.05, 0.0])
    assert first["lin_vel_error_worst"] == pytest.approx(0.1414214, abs=1e-5)
    assert not second["passed"] and second["fall_rate"] == 0.5 and second["lin_vel_error"] == 0.0
    assert first["tilt_rate_rms"] == pytest.approx(0.2) and second["tilt_rate_rms"] == pytest.approx(0.2)
    assert not third["passed"] and third["ang_vel_error"] == pytest.approx(0.45, abs=1e-6)
    assert report["passed"] is False
    # Signed, over the three commands: 0, 0 and 0.55 - 1.0 (turning right of the command).
    assert report["overall"]["ang_vel_offset"] == pytest.approx(-0.45 / 3, abs=1e-6)


def test_the_ang_vel_offset_skips_commands_whose_envs_all_fell():
    sweep = _sweep(commands=[(0.0, 0.0, 0.5), (0.0, 0.0, -0.5)], envs_per_command=1)
    commands = torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.0, -0.5]])
    mean_twist = torch.tensor([[0.0, 0.0, 0.8], [0.0, 0.0, 0.0]])  # left of the command by 0.3
    report = sweep._report(commands, torch.tensor([False, True]), mean_twist, torch.zeros(2), torch.zeros(2), 3.0)
    assert report["overall"] == {"ang_vel_offset": pytest.approx(0.3, abs=1e-6)}
    report = sweep._report(commands, torch.tensor([True, True]), mean_twist, torch.zeros(2), torch.zeros(2), 3.0)
    assert report["overall"] == {}
