"""The runner contract, bad inputs, and construction-time failures (mujoco backend)."""

from __future__ import annotations

import pytest
import torch
from controlled_owner import force_done
from reset_friction_owner import register_reset_friction_task
from unilab.config import ObsTermCfg
from unilab.managers.base import requires
from unilab.registry import register_task
from unilab.robot import MissingCapability
from unilab.tasks.velocity.config.g1.flat import g1_walk_flat
from unisim import Feature

import unilab

N = 4


def test_runner_contract_shapes_and_types(make_env):
    env = make_env()
    assert env.num_envs == N and isinstance(env.device, torch.device)
    assert set(env.observation_spec) == {"policy", "critic"}
    assert env.action_dim == 29 and env.max_episode_length == 1000 and env.step_dt == pytest.approx(0.02)
    obs = env.reset()
    for group, dim in env.observation_spec.items():
        assert obs[group].shape == (N, dim) and obs[group].dtype == torch.float32
    obs, rew, term, trunc, info = env.step(torch.zeros(N, env.action_dim))
    assert rew.shape == (N,) and rew.dtype == torch.float32
    assert term.dtype == torch.bool and trunc.dtype == torch.bool and term.shape == trunc.shape == (N,)
    assert {g: t.shape for g, t in info["final_obs"].items()} == {g: (N, d) for g, d in env.observation_spec.items()}
    metrics = env.flush_metrics()
    assert all(isinstance(v, float) for v in metrics.values())
    assert set(metrics) >= set(env.metric_names)  # what the terms declared, by name
    assert {"episodes", "metrics/twist/lin_vel_error", "metrics/twist/ang_vel_error", "metrics/twist/ang_vel_offset",
            "reward/track_lin_vel", "termination/fell_over"} <= set(env.metric_names)


@pytest.mark.parametrize("bad", [
    torch.zeros(N, 28), torch.zeros(N + 1, 29), torch.zeros(N, 29, dtype=torch.float64),
    torch.full((N, 29), float("nan")), [[0.0] * 29] * N, torch.zeros(N, 29, requires_grad=True),
], ids=["cols", "rows", "dtype", "nan", "list", "requires_grad"])
def test_bad_action_is_refused_naming_action_and_state_is_untouched(make_env, bad):
    env = make_env()
    env.step(torch.zeros(N, env.action_dim))
    qpos = env.robot.qpos.clone()
    length = env.episode_length.clone()
    last = env.action_manager.action.clone()
    with pytest.raises(ValueError, match="action"):
        env.step(bad)
    assert torch.equal(env.robot.qpos, qpos) and torch.equal(env.episode_length, length)
    assert torch.equal(env.action_manager.action, last)


def test_term_needing_a_missing_body_lists_available_bodies(make_env):
    with pytest.raises(ValueError, match=r"rewards term 'velocity'.*unknown body 'nose'.*pelvis"):
        make_env(overrides=["rewards.velocity.params.torso_body=nose"])


def test_term_needing_a_missing_joint_lists_available_joints(make_env):
    with pytest.raises(ValueError, match=r"no actuated joint matches.*left_knee_joint"):
        make_env(overrides={"actions.joint_names": ["tail_.*"]})


def test_term_needing_a_missing_sensor_lists_available_sensors(make_env):
    from unilab.terms.observations import sensor
    cfg_overrides = None

    def build():
        cfg = g1_walk_flat()
        cfg.observations["policy"].terms["imu"] = ObsTermCfg(func=sensor, params={"name": "imu_accel"})
        return cfg

    register_task("test_missing_sensor", build)
    with pytest.raises(ValueError, match=r"observations.policy term 'imu'.*imu_ang_vel"):
        make_env(task="test_missing_sensor", overrides=cfg_overrides)


@requires(Feature.GRAPH_CAPTURE)
def graph_only_term(env):
    return env.robot.root_pos_w


def test_term_needing_an_undeclared_capability_fails_at_construction(make_env):
    def build():
        cfg = g1_walk_flat()
        cfg.observations["critic"].terms["graph_only"] = ObsTermCfg(func=graph_only_term)
        return cfg

    register_task("test_missing_capability", build)
    with pytest.raises(MissingCapability, match=r"term 'graph_only'.*capability.*graph_capture"):
        make_env(task="test_missing_capability")


def test_model_field_event_fails_when_the_field_is_not_declared(make_env):
    from unilab.config import EventTermCfg
    from unilab.terms.events import randomize_friction

    class randomize_gear(randomize_friction):
        field = "actuator_gear"

    def build():
        cfg = g1_walk_flat()
        cfg.events["gear"] = EventTermCfg(func=randomize_gear, mode="startup")
        return cfg

    register_task("test_missing_field", build)
    with pytest.raises(MissingCapability, match=r"term 'gear'.*model field 'actuator_gear'"):
        make_env(task="test_missing_field")


def test_domain_randomization_writes_declared_model_fields(make_env):
    env = make_env(task="g1_walk_flat_dr")
    mass = env.backend.model_field("body_mass")
    torso = env.robot.body_index("torso_link", "test")
    assert not torch.allclose(mass[:, torso], mass[:1, torso].expand(N))  # per-env draws
    env.step(torch.zeros(N, env.action_dim))


def test_reset_mode_model_field_event_writes_only_the_reset_rows(make_env):
    env = make_env(task=register_reset_friction_task("test_reset_friction", (0.5, 1.5)))
    before = env.backend.model_field("geom_friction").clone()
    force_done(env, torch.tensor([False, True, False, False]))
    env.step(torch.zeros(N, env.action_dim))
    after = env.backend.model_field("geom_friction")
    assert not torch.equal(after[1], before[1])
    assert torch.equal(after[[0, 2, 3]], before[[0, 2, 3]])


def test_a_friction_range_below_the_backends_declared_minimum_fails_at_construction(make_env):
    task = register_reset_friction_task("test_friction_to_zero", (0.0, 1.0))
    # mjwarp declares sliding friction >= 1e-3 (contract 1.2); the env skips per-write checks,
    # so the range itself is refused up front, naming the term.
    with pytest.raises(ValueError, match=r"events\[reset\] term 'friction'.*geom_friction.*declared minimums"):
        make_env(task=task, backend="mjwarp")
    make_env(task=task, backend="mujoco")  # MuJoCo C's declared minimum is 0: a factor of 0 is allowed
    negative = register_reset_friction_task("test_friction_negative", (-1.0, 1.0))
    with pytest.raises(ValueError, match=r"events\[reset\] term 'friction'.*geom_friction.*declared minimums"):
        make_env(task=negative, backend="mujoco")


def test_unknown_backend_is_refused_naming_the_argument_and_listing_the_active_ones():
    with pytest.raises(ValueError, match=r"^backend: unknown backend 'bullet'.*mujoco"):
        unilab.make_manager_based_rl_env("g1_walk_flat", backend="bullet", num_envs=2)
    # Checked before the task's config: a bad backend is the error, whatever else is wrong.
    with pytest.raises(ValueError, match=r"^backend: unknown backend 'bullet'"):
        unilab.make_manager_based_rl_env("g1_walk_flat", backend="bullet", num_envs=2, overrides={"nokey": 1})



def test_a_sparse_action_is_refused_naming_its_layout_and_state_is_untouched(make_env):
    for overrides in (None, {"validate_actions": False}):  # checked whether values are validated or not
        env = make_env(overrides=overrides)
        env.step(torch.rand(N, env.action_dim))
        last, prev = env.action_manager.action.clone(), env.action_manager.prev_action.clone()
        with pytest.raises(ValueError, match=r"action: expected a dense \(strided\) tensor, got layout torch.sparse_coo"):
            env.step(torch.zeros(N, env.action_dim).to_sparse())
        assert torch.equal(env.action_manager.action, last) and torch.equal(env.action_manager.prev_action, prev)


def test_an_env_used_after_close_is_refused_before_any_bookkeeping(make_env):
    env = make_env()
    env.step(torch.rand(N, env.action_dim))
    env.close()
    prev, sums, rng = (env.action_manager.prev_action.clone(), env.reward_manager.episode_sums.clone(),
                       env.rng.get_state())
    for call in (lambda: env.step(torch.zeros(N, env.action_dim)), env.reset):
        with pytest.raises(ValueError, match=r"^env: used after close\(\)$"):
            call()
    assert torch.equal(env.action_manager.prev_action, prev) and torch.equal(env.reward_manager.episode_sums, sums)
    assert torch.equal(env.rng.get_state(), rng)


def test_an_episode_too_long_to_count_is_refused_naming_episode_length_s(make_env):
    with pytest.raises(ValueError, match=r"^episode_length_s: 1e\+300 s at .* per env step is more than"):
        make_env(overrides={"episode_length_s": 1e300})


def test_a_time_out_on_a_step_that_also_ended_the_episode_by_a_fall_counts_as_the_fall(make_env):
    # Every row times out and is too low on every step: terminated, not truncated, and the
    # metrics say which condition ended the episodes.
    env = make_env(task="g1_walk_flat", overrides={"episode_length_s": 0.02,
                                                  "terminations.base_too_low.params.min_height": 10.0})
    for _ in range(3):
        _, _, terminated, truncated, _ = env.step(torch.zeros(N, env.action_dim))
        assert terminated.all() and not truncated.any()
    metrics = env.flush_metrics()
    assert metrics["episodes"] == 3 * N
    assert metrics["termination/base_too_low"] == 3 * N and metrics["termination/time_out"] == 0


def test_an_env_built_on_cpu_0_runs_on_the_host(make_env):
    # The backend used to keep "cpu:0" and refuse the env's own tensors, made on "cpu".
    env = make_env(device="cpu:0")
    env.step(torch.zeros(N, env.action_dim))
    assert str(env.device) == "cpu"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seed": -1}, r"^seed: expected an int in \[0, 2\*\*63\), got -1$"),
    ({"seed": 2**64 - 1}, r"^seed: expected an int in \[0, 2\*\*63\)"),
    ({"overrides": 5}, r"^overrides: expected a dict, 'key=value' strings or one such string, got int$"),
    ({"backend_options": "nthread=1"}, r"^backend_options: expected a mapping of option names to values, got str$"),
])
def test_factory_arguments_of_the_wrong_kind_are_refused_naming_the_argument(kwargs, message):
    # -1 and 2**64 - 1 seeded torch's generator alike; the others failed inside the factory.
    with pytest.raises(ValueError, match=message):
        unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, **kwargs)


def test_a_task_is_registered_only_under_a_name_with_a_builder():
    registered = unilab.list_tasks()
    with pytest.raises(ValueError, match=r"^name: expected a non-empty task name \(str\), got 7$"):
        unilab.register_task(7, lambda: None)
    with pytest.raises(ValueError, match=r"^build: expected a callable returning an EnvCfg, got str$"):
        unilab.register_task("not_a_builder", "g1_walk_flat")
    assert unilab.list_tasks() == registered  # nothing half-registered; listing still works


def test_a_step_the_backend_refuses_leaves_the_action_buffers_as_they_were(make_env):
    # Values unchecked by the env (validate_actions=false), checked by the backend (validate).
    env = make_env(overrides={"validate_actions": False}, backend_options={"validate": True})
    env.step(torch.rand(N, env.action_dim))
    last, prev = env.action_manager.action.clone(), env.action_manager.prev_action.clone()
    bad = torch.zeros(N, env.action_dim)
    bad[0, 3] = float("nan")
    with pytest.raises(ValueError, match="ctrl"):
        env.step(bad)
    assert torch.equal(env.action_manager.action, last) and torch.equal(env.action_manager.prev_action, prev)
    _, reward, *_ = env.step(torch.zeros(N, env.action_dim))
    assert torch.isfinite(reward).all()


def test_phase_times_count_only_the_steps_state_writes(make_env):
    # The writes of construction and of reset() were charged to the step's phase, so a flush
    # after no step reported a time per step.
    env = make_env(overrides={"profile_phases": True})
    for _ in range(3):
        env.reset()
    assert not any(k.startswith("time/") for k in env.flush_metrics())
    env.step(torch.zeros(N, env.action_dim))
    assert env.flush_metrics()["time/reset_done_reset_call_ms"] > 0
