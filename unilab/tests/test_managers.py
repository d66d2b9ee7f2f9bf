"""Observation history, curriculum, metric and recorder managers; empty managers."""

from __future__ import annotations

import pytest
import torch
from controlled_owner import controlled_cfg, force_done
from unilab.config import MetricTermCfg, RecorderTermCfg
from unilab.registry import register_task
from unilab.tasks.velocity.config.g1.flat import g1_walk_flat
from unilab.terms import observations as obs_terms

N = 4


def test_history_stacks_frames_and_restarts_on_reset(make_env):
    env = make_env(overrides=["observations.policy.history_length=3", "observations.policy.enable_corruption=false"])
    d = 96  # policy frame: 3 + 3 + 3 + 29 + 29 + 29
    assert env.observation_spec["policy"] == 3 * d
    obs = env.reset()
    frames = obs["policy"].view(N, 3, d)
    assert torch.equal(frames[:, 0], frames[:, 2])  # a fresh episode repeats its first frame
    prev = obs["policy"].view(N, 3, d)[:, 2].clone()
    force_done(env, torch.tensor([True, False, False, False]))
    obs, *_ = env.step(torch.zeros(N, env.action_dim))
    frames = obs["policy"].view(N, 3, d)
    assert torch.equal(frames[1:, 1], prev[1:])  # running rows shifted by one frame
    assert torch.equal(frames[0, 0], frames[0, 2])  # the reset row restarted its history


def test_curriculum_widens_command_ranges_at_its_milestone(make_env):
    env = make_env(overrides={"commands.twist.lin_vel_x": [-0.1, 0.1], "curriculum.command_ranges.params.stages": [
        {"step": 0, "lin_vel_x": [-0.1, 0.1]}, {"step": 2, "lin_vel_x": [2.0, 2.0]}]})
    cmd = env.command_manager.terms["twist"]
    env.step(torch.zeros(N, env.action_dim))
    assert cmd.ranges[0] == (-0.1, 0.1)
    env.step(torch.zeros(N, env.action_dim))
    assert cmd.ranges[0] == (2.0, 2.0)
    assert env.flush_metrics()["curriculum/command_ranges/stage"] == 1.0


def test_a_command_range_the_first_stage_would_replace_is_refused_naming_both(make_env):
    # Without the check the override held for the draws made at construction only: the stage
    # at step 0 put its own range back on the first step, without a word.
    with pytest.raises(ValueError, match=r"commands\.twist\.lin_vel_x=\(1\.5, 2\.0\) is replaced on the first step "
                                         r"by the curriculum's stage at step 0 \(lin_vel_x=\(-1\.0, 1\.0\)\)"):
        make_env(overrides={"commands.twist.lin_vel_x": [1.5, 2.0]})
    env = make_env(overrides={"commands.twist.lin_vel_x": [1.5, 2.0], "curriculum.command_ranges": None})
    env.step(torch.zeros(N, env.action_dim))
    assert env.command_manager.terms["twist"].ranges[0] == (1.5, 2.0)


@pytest.mark.parametrize(("stages", "message"), [
    ([{"step": 0, "lin_vel_x": (0.0, float("nan"))}], r"stages\[0\]\.lin_vel_x=\(0\.0, nan\): expected finite"),
    ([{"step": 0, "lin_vel_x": (1.0, -1.0, 7.0)}], r"stages\[0\]\.lin_vel_x=.*expected a \(low, high\) pair"),
    ([{"step": 0, "lin_vel_x": (-1.0, 1.0)}, {"step": 2, "lin_vel_x": "fast"}], r"stages\[1\]\.lin_vel_x='fast'"),
    ([{"step": 2.5, "lin_vel_x": (-1.0, 1.0)}], r"stages\[0\]\.step=2\.5: expected an int >= 0"),
    ([{"step": 0, "lin_vel_z": (-1.0, 1.0)}], r"stages\[0\]: unknown keys \['lin_vel_z'\]"),
])
def test_curriculum_stages_are_checked_when_the_env_is_built_not_midway_through_a_step(make_env, stages, message):
    with pytest.raises(ValueError, match=message):
        make_env(overrides={"curriculum.command_ranges.params.stages": stages})


def _with_metric_and_recorder():
    cfg = g1_walk_flat()
    cfg.metrics["base_height"] = MetricTermCfg(func=lambda env: env.robot.root_pos_w[:, 2])
    cfg.recorders["root_height"] = RecorderTermCfg(func=obs_terms.base_height, capacity=3)
    return cfg


def test_metric_terms_average_and_recorders_keep_the_last_steps(make_env):
    register_task("test_metric_recorder", _with_metric_and_recorder)
    env = make_env(task="test_metric_recorder")
    heights = []
    for _ in range(5):
        env.step(torch.zeros(N, env.action_dim))
        heights.append(env.robot.root_pos_w[:, 2:3].clone())
    m = env.flush_metrics()
    assert abs(m["metrics/base_height"] - torch.stack(heights).mean().item()) < 1e-5
    rec = env.recorder_manager.data()["root_height"]
    assert rec.shape == (3, N, 1) and torch.equal(rec, torch.stack(heights[-3:]))


def test_empty_managers_cost_nothing(make_env):
    env = make_env(overrides=["curriculum.command_ranges=None", "events.reset_yaw=None",
                              "events.reset_joints=None"])
    assert not env.curriculum_manager.terms and not env.recorder_manager.terms and not env.metric_manager.terms
    assert not env.event_manager.reset_terms and not env.event_manager.interval_terms
    assert env.event_manager.tick_interval(env, env.step_dt) is None
    env.step(torch.zeros(N, env.action_dim))


def test_reset_yaw_is_a_rotation_about_world_z_of_the_keyframe_orientation(make_env):
    from unilab.managers.event import StateTransaction
    from unilab.terms.events import reset_root_yaw

    from unilab import math as lm

    env = make_env()
    q0 = torch.nn.functional.normalize(torch.tensor([[0.9, 0.1, -0.2, 0.3]]), dim=1).expand(N, 4)
    qpos = env.default_qpos.expand(N, -1).clone()
    qpos[:, 3:7] = q0
    ones = torch.ones(N, dtype=torch.bool)
    txn = StateTransaction(ones, ~ones, qpos, env.default_qvel.expand(N, -1).clone(), env.robot.qvel.clone())
    state = env.rng.get_state()
    reset_root_yaw(env, txn, yaw_range=(-3.0, 3.0))
    env.rng.set_state(state)
    yaw = -3.0 + 6.0 * torch.rand((N, 1), generator=env.rng)
    expected = lm.quat_mul(lm.quat_from_yaw(yaw[:, 0]), q0)
    assert torch.allclose(txn.reset_qpos[:, 3:7], expected, atol=1e-6)


def test_heading_envs_track_a_sampled_heading_with_a_clipped_p_controller(make_env):
    from unilab.math import wrap_to_pi

    env = make_env(overrides=["commands.twist.heading_command=true", "commands.twist.heading_fraction=1.0",
                              "commands.twist.standing_fraction=0.0"])
    env.step(torch.zeros(N, env.action_dim))
    twist = env.command_manager.terms["twist"]
    err = wrap_to_pi(twist.heading_target - env.robot.heading_w)
    expected = (0.5 * err).clamp(*twist.ranges[2])
    assert torch.allclose(env.command_manager.term("twist").command[:, 2], expected, atol=1e-6)


def test_a_draw_holds_the_standing_and_heading_shares_and_the_ranges(make_env):
    env = make_env(overrides=["commands.twist.standing_fraction=0.3", "commands.twist.heading_command=true",
                              "commands.twist.heading_fraction=0.4", "commands.twist.heading_range=[-1,2]",
                              "commands.twist.resampling_time_range_s=[3,8]"])
    twist = env.command_manager.term("twist")
    draws = twist._draw(20000)
    moving, heading = draws[:, 3], draws[:, 4]
    assert set(moving.unique().tolist()) == {0.0, 1.0} and set(heading.unique().tolist()) == {0.0, 1.0}
    assert abs(float(moving.mean()) - 0.7) < 0.02 and abs(float(heading.mean()) - 0.4) < 0.02
    assert float(draws[:, 5].min()) >= -1.0 and float(draws[:, 5].max()) <= 2.0
    assert float(draws[:, 6].min()) >= 3.0 and float(draws[:, 6].max()) <= 8.0
    # Without heading commands no row heads; a standing row is commanded zero.
    plain = make_env(overrides=["commands.twist.standing_fraction=0.5"])
    term = plain.command_manager.term("twist")
    assert float(term._draw(20000)[:, 4].max()) == 0.0
    plain.step(torch.zeros(N, plain.action_dim))
    standing = term.moving == 0.0
    assert torch.equal(term.command[standing], torch.zeros_like(term.command[standing]))
    assert torch.equal(term.command[~standing], term.sampled[~standing])


def test_single_axis_draws_keep_one_axis_in_its_range_and_zero_the_others(make_env):
    env = make_env(overrides=["commands.twist.single_axis_fraction=1.0", "commands.twist.standing_fraction=0.0"])
    twist = env.command_manager.term("twist")
    draws = torch.cat([twist._draw(4096)[:, :3] for _ in range(4)])
    nonzero = draws != 0.0
    assert (nonzero.sum(dim=1) == 1).all()
    share = nonzero.float().mean(dim=0)  # each axis is the kept one about a third of the time
    assert ((share - 1 / 3).abs() < 0.02).all(), share
    lo, hi = twist.lo, twist.lo + twist.width
    assert ((draws >= lo) & (draws <= hi) | ~nonzero).all()


def test_a_partial_single_axis_fraction_leaves_the_other_draws_joint(make_env):
    env = make_env(overrides=["commands.twist.single_axis_fraction=0.25"])
    draws = env.command_manager.term("twist")._draw(16384)[:, :3]
    single = ((draws != 0.0).sum(dim=1) == 1).float().mean()
    assert abs(float(single) - 0.25) < 0.02, single


def test_without_single_axis_draws_the_command_stream_is_the_jointly_sampled_box(make_env):
    # The option must not move the default's random stream (recorded behaviour depends on it).
    env = make_env()
    twist = env.command_manager.term("twist")
    state = env.rng.get_state()
    draws = twist._draw(64)[:, :3]
    env.rng.set_state(state)
    u = torch.rand(64, 7, generator=env.rng, device=env.device)
    assert torch.equal(draws, twist.lo + twist.width * u[:, :3])


def _first_step(make_env, task="test_controlled", overrides=None):
    env = make_env(task=task, overrides=overrides)
    obs, *_ = env.step(torch.zeros(N, env.action_dim))
    return env, obs


def test_a_policy_group_opening_the_critic_reads_its_head_and_keeps_its_noise_to_itself(make_env):
    noisy_env, noisy = _first_step(make_env)
    _, clean = _first_step(make_env, overrides=["observations.policy.enable_corruption=false"])
    assert noisy_env.observation_manager.head_of["policy"].name == "critic"
    d = noisy_env.observation_spec["policy"]
    assert torch.equal(noisy["critic"], clean["critic"])  # the policy's noise did not reach the critic
    assert not torch.equal(noisy["policy"], clean["policy"])  # it reached the policy
    assert torch.equal(clean["policy"], clean["critic"][:, :d])
    assert clean["policy"].data_ptr() != clean["critic"].data_ptr()  # a tensor of its own
    assert clean["policy"].is_contiguous() and noisy["policy"].is_contiguous()  # not a strided view


def _noisy_critic_first():
    """The critic group first and corrupted (the policy's noise on its policy terms), the
    policy after it, clean: the policy reads the head of a frame its source corrupts later."""
    cfg = controlled_cfg()
    policy, critic = cfg.observations["policy"], cfg.observations["critic"]
    for name, term in policy.terms.items():
        critic.terms[name].noise = term.noise
    critic.enable_corruption, policy.enable_corruption = True, False
    cfg.observations = {"critic": critic, "policy": policy}
    return cfg


def test_a_group_read_from_a_corrupted_source_gets_the_frame_before_the_noise(make_env):
    register_task("test_noisy_critic_first", _noisy_critic_first)
    env, obs = _first_step(make_env, task="test_noisy_critic_first")
    _, clean = _first_step(make_env, overrides=["observations.policy.enable_corruption=false"])
    assert env.observation_manager.head_of["policy"].name == "critic"
    d = env.observation_spec["policy"]
    assert torch.equal(obs["policy"], clean["policy"])
    assert not torch.equal(obs["critic"][:, :d], clean["critic"][:, :d])  # the critic's own noise


def test_joint_limit_violation_is_the_distance_outside_the_soft_range():
    from types import SimpleNamespace

    from unilab.terms.rewards import joint_limit_violation

    env = SimpleNamespace(robot=SimpleNamespace(joint_pos=torch.tensor([[-2.0, 0.5, 3.0], [0.0, 0.0, 0.0]])))
    lo, hi = torch.tensor([-1.0, -1.0, -1.0]), torch.tensor([1.0, 1.0, 1.0])
    assert joint_limit_violation(env, lo, hi).tolist() == [3.0, 0.0]  # 1 below, inside, 2 above; all inside


def test_air_time_counts_only_single_support_and_is_capped():
    from types import SimpleNamespace

    from unilab.tasks.velocity.mdp.rewards import air_time_biped

    feet = SimpleNamespace(contact=torch.tensor([[True, False], [True, True], [False, False], [False, True]]),
                           contact_time=torch.tensor([[0.3, 0.0], [0.2, 0.2], [0.0, 0.0], [0.0, 0.9]]),
                           air_time=torch.tensor([[0.0, 0.2], [0.0, 0.0], [0.5, 0.5], [0.6, 0.0]]))
    # single support: min(contact time of the stance foot, air time of the swing foot), capped at 0.4
    assert torch.allclose(air_time_biped(feet, 0.4), torch.tensor([0.2, 0.0, 0.0, 0.4]))
