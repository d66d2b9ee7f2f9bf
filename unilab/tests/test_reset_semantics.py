"""Selected reset: one transaction, only done rows change, views authoritative at once,
final observations pre-reset; time-out vs termination; RNG determinism."""

from __future__ import annotations

import pytest
import torch
from controlled_owner import force_done

N = 4
NO_NOISE = ["observations.policy.enable_corruption=false"]


def _act(env, k):
    g = torch.Generator().manual_seed(k)
    return 0.3 * torch.randn(env.num_envs, env.action_dim, generator=g)


def test_only_done_rows_change_and_final_obs_is_pre_reset(make_env):
    a, b = make_env(overrides=NO_NOISE), make_env(overrides=NO_NOISE)
    for k in range(3):
        a.step(_act(a, k)), b.step(_act(b, k))
    calls = a.backend.diagnostics().get("set_state_calls")
    force_done(a, torch.tensor([False, True, False, True]))
    obs_a, _, term_a, trunc_a, info_a = a.step(_act(a, 3))
    obs_b, _, term_b, _, _ = b.step(_act(b, 3))
    assert term_a.tolist() == [False, True, False, True] and not trunc_a.any() and not term_b.any()
    if calls is not None:  # one set_state call for the whole reset
        assert a.backend.diagnostics()["set_state_calls"] == calls + 1
    keep, done = torch.tensor([0, 2]), torch.tensor([1, 3])
    assert torch.equal(a.robot.qpos[keep], b.robot.qpos[keep])
    assert torch.equal(a.robot.qvel[keep], b.robot.qvel[keep])
    for g in obs_a:
        assert torch.equal(obs_a[g][keep], obs_b[g][keep])
        assert torch.allclose(info_a["final_obs"][g][done], obs_b[g][done])  # pre-reset obs
    assert torch.equal(a.episode_length, torch.tensor([4, 0, 4, 0]))


def test_reset_rows_views_are_authoritative_without_a_step(make_env):
    env = make_env(overrides=NO_NOISE)
    for k in range(5):
        env.step(_act(env, k))
    steps = env.backend.diagnostics().get("physics_steps")
    force_done(env, torch.tensor([True, False, False, True]))
    obs, *_ = env.step(_act(env, 5))
    if steps is not None:
        assert env.backend.diagnostics()["physics_steps"] == steps + env.decimation  # no re-step
    views = env.backend.views()
    rows = torch.tensor([0, 3])
    pelvis = env.robot.body_index("pelvis", "test")
    # Keyframe height and zero velocity, seen by every view of the reset rows.
    assert torch.allclose(views.qpos[rows, 2], torch.tensor(0.76))
    assert torch.allclose(views.body_pos_w[rows, pelvis], views.qpos[rows, :3], atol=1e-6)
    assert torch.allclose(views.body_quat_w[rows, pelvis], views.qpos[rows, 3:7], atol=1e-6)
    assert torch.all(views.qvel[rows] == 0) and torch.allclose(views.body_lin_vel_w[rows], torch.zeros(3), atol=1e-6)
    # Joints within the reset offset of the keyframe; observations show the new state.
    assert torch.all((env.robot.joint_pos[rows] - env.default_joint_pos).abs() <= 0.1 + 1e-6)
    assert torch.allclose(obs["policy"][rows, 3:6], torch.tensor([0.0, 0.0, -1.0]), atol=1e-5)
    assert torch.all(obs["policy"][rows, -29:] == 0)  # last action cleared


def test_time_out_is_truncation_and_a_fall_on_the_last_step_is_termination(make_env):
    env = make_env(overrides=["episode_length_s=0.1"])  # 5 steps
    assert env.max_episode_length == 5
    for k in range(4):
        _, _, term, trunc, _ = env.step(_act(env, k))
        assert not term.any() and not trunc.any()
    force_done(env, torch.tensor([True, False, False, False]))
    _, _, term, trunc, _ = env.step(_act(env, 4))
    assert term.tolist() == [True, False, False, False]
    assert trunc.tolist() == [False, True, True, True]
    assert torch.all(env.episode_length == 0)
    m = env.flush_metrics()
    # Row 0's episode was ended by the forced termination, not by the time-out that fired with it.
    assert m["episodes"] == 4 and m["termination/time_out"] == 3 and m["termination/forced"] == 1
    assert m["reward/alive"] == pytest.approx(5 * 0.5 * env.step_dt)  # per-episode sum of a component


def _rollout(env, steps=6):
    out = []
    for k in range(steps):
        if k == 3:
            force_done(env, torch.tensor([True, True, False, False]))
        obs, *_ = env.step(_act(env, k))
        out.append((obs["policy"].clone(), env.command_manager.term("twist").command.clone(), env.robot.qpos.clone()))
    return out


def test_same_seed_same_commands_noise_and_reset_states(make_env):
    a, b = _rollout(make_env(seed=7)), _rollout(make_env(seed=7))
    for (oa, ca, qa), (ob, cb, qb) in zip(a, b):
        assert torch.equal(oa, ob) and torch.equal(ca, cb) and torch.equal(qa, qb)


def test_different_seed_different_commands_noise_and_reset_states(make_env):
    a, b = _rollout(make_env(seed=7)), _rollout(make_env(seed=8))
    assert not torch.equal(a[0][0], b[0][0])  # observation noise
    assert not torch.equal(a[0][1], b[0][1])  # commands
    assert not torch.equal(a[-1][2][:2], b[-1][2][:2])  # reset states of rows 0, 1


def test_fused_reward_term_equals_the_unfused_terms(make_env):
    fused = make_env(task="g1_walk_flat", seed=3)
    unfused = make_env(task="g1_walk_flat_unfused", seed=3)
    assert fused.reward_manager.components == unfused.reward_manager.components
    for k in range(8):
        _, ra, *_ = fused.step(_act(fused, k))
        _, rb, *_ = unfused.step(_act(unfused, k))
        assert torch.allclose(ra, rb, atol=1e-6)
        assert torch.allclose(fused.reward_manager.last_components, unfused.reward_manager.last_components,
                              atol=1e-6)
    ma, mb = fused.flush_metrics(), unfused.flush_metrics()
    assert ma.keys() == mb.keys()


def test_the_off_axis_weights_reach_both_reward_forms_alike(make_env):
    # mjlab's later weights: vertical velocity 2, roll and pitch rates 0.05.
    fused = make_env(task="g1_walk_flat", seed=3, overrides=["rewards.velocity.params.lin_vel_z_weight=2.0",
                                                            "rewards.velocity.params.ang_vel_xy_weight=0.05"])
    unfused = make_env(task="g1_walk_flat_unfused", seed=3, overrides=["rewards.track_lin_vel.params.z_weight=2.0",
                                                                      "rewards.track_ang_vel.params.xy_weight=0.05"])
    default = make_env(task="g1_walk_flat", seed=3)
    names = fused.reward_manager.components
    lin, ang = names.index("track_lin_vel"), names.index("track_ang_vel")
    for k in range(4):
        for env in (fused, unfused, default):
            env.step(_act(env, k))
        assert torch.allclose(fused.reward_manager.last_components, unfused.reward_manager.last_components,
                              atol=1e-6)
    # The kernels, from the state the last step reached, by their definition.
    robot, cmd = fused.robot, fused.command_manager.term("twist").command
    v, w = robot.root_lin_vel_b, robot.root_ang_vel_b
    lin_error = (cmd[:, :2] - v[:, :2]).square().sum(1) + 2.0 * v[:, 2].square()
    ang_error = (cmd[:, 2] - w[:, 2]).square() + 0.05 * w[:, :2].square().sum(1)
    weights = fused.cfg.rewards["velocity"].weights
    step_dt = fused.step_dt
    got = fused.reward_manager.last_components
    assert torch.allclose(got[:, lin], weights["track_lin_vel"] * torch.exp(-lin_error / 0.25) * step_dt, atol=1e-5)
    assert torch.allclose(got[:, ang], weights["track_ang_vel"] * torch.exp(-ang_error / 0.5) * step_dt, atol=1e-5)
    assert not torch.allclose(got[:, ang], default.reward_manager.last_components[:, ang])


def test_push_joins_the_single_transaction_and_moves_only_pushed_rows(make_env):
    env = make_env(task="g1_walk_flat", overrides=["events.push.interval_range_s=[0.02, 0.02]",
                                                   "events.push.params.velocity_range={'x': (0.5, 0.5)}"])
    # Same RNG consumption, zero push: the twin differs only by the push.
    twin = make_env(task="g1_walk_flat", overrides=["events.push.interval_range_s=[0.02, 0.02]",
                                                    "events.push.params.velocity_range={'x': (0.0, 0.0)}"])
    calls = env.backend.diagnostics().get("set_state_calls")
    env.step(_act(env, 0)), twin.step(_act(twin, 0))
    if calls is not None:
        assert env.backend.diagnostics()["set_state_calls"] == calls + 1
    # Every row was pushed by +0.5 m/s in world x; joints and positions are untouched.
    assert torch.allclose(env.robot.qvel[:, 0] - twin.robot.qvel[:, 0], torch.full((N,), 0.5), atol=1e-5)
    assert torch.equal(env.robot.qpos, twin.robot.qpos) and torch.equal(env.robot.qvel[:, 1:], twin.robot.qvel[:, 1:])


def test_terminated_and_truncated_from_interleaved_time_out_columns():
    # Columns: time-out, terminal, time-out, terminal (not contiguous: the index-tensor path).
    from unilab.managers.termination import _columns, split_fired

    time_out = [True, False, True, False]
    terminal_cols = _columns([i for i, t in enumerate(time_out) if not t], torch.device("cpu"))
    time_out_cols = _columns([i for i, t in enumerate(time_out) if t], torch.device("cpu"))
    assert isinstance(terminal_cols, torch.Tensor) and _columns([1, 2], torch.device("cpu")) == slice(1, 3)
    fired = torch.tensor([[1, 0, 0, 0], [0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)
    terminated, truncated = split_fired(fired, terminal_cols, time_out_cols)  # what compute() returns
    assert terminated.tolist() == [False, True, True, False, False]
    assert truncated.tolist() == [True, False, False, True, False]  # a fall on a time-out step is a fall
    terminated, truncated = split_fired(fired, None, time_out_cols)  # a task without terminal terms
    assert not terminated.any() and truncated.tolist() == [True, False, True, True, False]


def test_one_time_out_column_and_contiguous_terminal_columns_give_the_same_split():
    # Columns: terminal, terminal, time-out. The single time-out column is read as a view and the
    # terminal ones as a slice; the split must equal the gathered one's.
    from unilab.managers.termination import _columns, split_fired

    cpu = torch.device("cpu")
    assert _columns([2], cpu) == slice(2, 3) and _columns([0, 1], cpu) == slice(0, 2)
    fired = torch.tensor([[0, 0, 1], [1, 0, 1], [0, 1, 0], [0, 0, 0]], dtype=torch.bool)
    terminated, truncated = split_fired(fired, slice(0, 2), slice(2, 3))
    gathered = split_fired(fired, torch.tensor([0, 1]), torch.tensor([2]))
    assert terminated.tolist() == gathered[0].tolist() == [False, True, True, False]
    assert truncated.tolist() == gathered[1].tolist() == [True, False, False, False]
    # What a step returns owns its memory: one terminal column is not handed out as a view.
    terminated, truncated = split_fired(fired, slice(0, 1), slice(1, 3))
    assert terminated.is_contiguous() and terminated.data_ptr() != fired.data_ptr()
    assert terminated.tolist() == [False, True, False, False] and truncated.tolist() == [True, False, True, False]
