"""A task author's view of the runtime: everything below is defined in this file alone (a
command of its own width, a sensor read by two terms, a fused termination, named metrics)
and runs through ``make_manager_based_rl_env`` without any manager knowing of it. Plus the
step order: rewards and command metrics score the command the policy acted on."""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import pytest
import torch
from unilab.assets import g1_scene_path
from unilab.config import (
    CommandTermCfg,
    EnvCfg,
    MetricTermCfg,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    SensorCfg,
    TerminationTermCfg,
)
from unilab.managers.command import CommandTerm
from unilab.registry import register_task
from unilab.terms import observations as obs

N = 4


class GoalPointCommand(CommandTerm):
    """A world-frame (x, y) goal per env, drawn at each episode start."""

    metric_names = ("distance",)

    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        self.command = torch.zeros(env.num_envs, 2, device=env.device)

    def reset(self, done: torch.Tensor) -> None:
        r = self.cfg.radius
        goal = r * (2 * torch.rand(self.env.num_envs, 2, generator=self.env.rng, device=self.env.device) - 1)
        self.command = torch.where(done[:, None], goal, self.command)

    def metrics(self) -> torch.Tensor:
        return self.distance().mean().unsqueeze(0)

    def distance(self) -> torch.Tensor:
        return torch.linalg.vector_norm(self.command - self.env.robot.root_pos_w[:, :2], dim=1)


class GoalPointCommandCfg(CommandTermCfg):
    type: Literal["test_goal_point"] = "test_goal_point"
    term_class: ClassVar[type] = GoalPointCommand
    radius: float = 2.0


class Travel:
    """Planar distance the base travelled this episode; counts its own updates."""

    def __init__(self, cfg, env) -> None:
        self.robot = env.robot
        self.travel = torch.zeros(env.num_envs, device=env.device)
        self.last_xy = env.robot.root_pos_w[:, :2].clone()
        self.updates = 0

    def update(self, env) -> None:
        xy = self.robot.root_pos_w[:, :2]
        self.travel = self.travel + torch.linalg.vector_norm(xy - self.last_xy, dim=1)
        self.last_xy = xy.clone()
        self.updates += 1

    def reset(self, done: torch.Tensor) -> None:
        self.travel = self.travel.masked_fill(done, 0.0)


class travel_observation:
    def __init__(self, cfg, env) -> None:
        self.sensor = env.sensor(cfg.params["sensor_name"], "travel_observation")

    def __call__(self, env) -> torch.Tensor:
        return self.sensor.travel.unsqueeze(1)


class travel_reward:
    def __init__(self, cfg, env) -> None:
        self.sensor = env.sensor(cfg.params["sensor_name"], "travel_reward")

    def __call__(self, env) -> torch.Tensor:
        return self.sensor.travel


class fell_or_timed_out:
    """Both terminations of this task in one (N, 2) term."""

    components = ("too_low", "time_out")

    def __init__(self, cfg, env) -> None:
        self.min_height = cfg.params["min_height"]

    def __call__(self, env) -> torch.Tensor:
        too_low = env.robot.root_pos_w[:, 2] < self.min_height
        return torch.stack((too_low, env.episode_length >= env.max_episode_length), dim=1)


def goal_task() -> EnvCfg:
    group = {"command": ObsTermCfg(func=obs.generated_commands, params={"command_name": "goal"}),
             "travel": ObsTermCfg(func=travel_observation, params={"sensor_name": "travel"}),
             "joint_pos": ObsTermCfg(func=obs.joint_pos_rel)}
    return EnvCfg(
        scene=g1_scene_path, reset_keyframe="knees_bent", episode_length_s=0.06,  # 3 steps
        sensors={"travel": SensorCfg(func=Travel)},
        commands={"goal": GoalPointCommandCfg(radius=3.0)},
        observations={"policy": ObsGroupCfg(terms=group), "critic": ObsGroupCfg(terms=group)},
        rewards={"travel": RewardTermCfg(func=travel_reward, params={"sensor_name": "travel"}, weight=1.0)},
        terminations={"ended": TerminationTermCfg(func=fell_or_timed_out, params={"min_height": 0.2},
                                                  time_out_components=("time_out",))},
        metrics={"base_height": MetricTermCfg(func=lambda env: env.robot.root_pos_w[:, 2])},
        reward_scale_by_dt=False,
    )


register_task("test_goal_point", goal_task)


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_a_task_defined_in_one_file_runs_with_its_own_command_sensor_termination_and_metrics(make_env, backend):
    env = make_env(task="test_goal_point", backend=backend, num_envs=N)
    assert env.observation_spec == {"policy": 2 + 1 + 29, "critic": 2 + 1 + 29}
    assert {"metrics/goal/distance", "metrics/base_height", "reward/travel", "termination/too_low",
            "termination/time_out"} <= set(env.metric_names)
    goal_term = env.command_manager.term("goal")
    sensor = env.sensor("travel", "test")
    zeros = torch.zeros(N, env.action_dim)
    distances = []
    for k in range(2):
        obs_, reward, terminated, truncated, _ = env.step(zeros)
        distances.append(goal_term.distance().mean().item())
        assert sensor.updates == k + 1  # once per step, though two terms read it
        assert torch.equal(obs_["policy"][:, 2], sensor.travel) and torch.equal(reward, sensor.travel)
        assert torch.equal(obs_["policy"][:, :2], goal_term.command)
        assert not (terminated | truncated).any()
    m = env.flush_metrics()
    assert m["metrics/goal/distance"] == pytest.approx(sum(distances) / 2, rel=1e-5)
    goals = goal_term.command.clone()
    _, _, terminated, truncated, _ = env.step(zeros)  # the third step times out through the fused term
    assert truncated.all() and not terminated.any()
    assert not torch.equal(goal_term.command, goals)  # new episodes, new goals
    assert torch.all(sensor.travel == 0)  # the sensor restarted with the episode
    m = env.flush_metrics()
    assert m["termination/time_out"] == N and m["termination/too_low"] == 0 and m["episodes"] == N


def test_an_unknown_sensor_is_refused_naming_the_term_and_the_configured_ones(make_env):
    with pytest.raises(ValueError, match=r"rewards term 'travel'.*unknown sensor 'nope'.*\['travel'\]"):
        make_env(task="test_goal_point", overrides=["rewards.travel.params.sensor_name=nope"])


def test_time_out_components_must_be_components_of_the_term(make_env):
    with pytest.raises(ValueError, match=r"terminations term 'ended'.*time_out_components \['late'\]"):
        make_env(task="test_goal_point", overrides={"terminations.ended.time_out_components": ["late"]})


def test_a_command_given_as_data_needs_a_registered_type():
    cfg = goal_task()
    dumped = cfg.model_dump()
    assert dumped["commands"]["goal"]["type"] == "test_goal_point"
    assert type(EnvCfg.model_validate(dumped).commands["goal"]) is GoalPointCommandCfg
    dumped["commands"]["goal"]["type"] = "teleport"
    with pytest.raises(ValueError, match=r"unknown command type 'teleport'; registered types: \[.*'test_goal_point'"):
        EnvCfg.model_validate(dumped)


def test_rewards_and_command_metrics_score_the_command_the_policy_acted_on(make_env):
    """With a command resampled every step, the reward of step t uses the command observed
    before step t, not the one drawn during it."""
    env = make_env(overrides=["commands.twist.resampling_time_range_s=[0.01,0.01]",
                              "commands.twist.standing_fraction=0.0", "curriculum.command_ranges=None"])
    twist = env.command_manager.term("twist")
    std2 = 0.25  # g1_walk_flat's track_lin_vel kernel
    weight = 2.0 * env.step_dt
    for k in range(3):
        seen = twist.command.clone()
        env.step(torch.full((N, env.action_dim), 0.1 * k))
        v = env.robot.root_lin_vel_b  # no row reset here: the post-step state is the scored one
        scored = lambda cmd: torch.exp(-((cmd[:, :2] - v[:, :2]).square().sum(1) + v[:, 2].square()) / std2)
        got = env.reward_manager.last_components[:, 0] / weight
        assert torch.allclose(got, scored(seen), atol=1e-5)
        assert not torch.allclose(got, scored(twist.command), atol=1e-3)  # the new command differs
    m = env.flush_metrics()
    assert math.isfinite(m["metrics/twist/lin_vel_error"])


def test_a_function_term_declares_its_fused_columns_with_the_fused_decorator(make_env):
    from unilab.config import RewardTermCfg
    from unilab.managers.base import fused

    @fused("height", "twice_height")
    def heights(env):
        z = env.robot.root_pos_w[:, 2]
        return torch.stack((z, 2 * z), dim=1)

    def task() -> EnvCfg:
        cfg = goal_task()
        cfg.rewards = {"heights": RewardTermCfg(func=heights, weights={"height": 1.0, "twice_height": -0.5})}
        return cfg

    register_task("test_fused_function", task)
    env = make_env(task="test_fused_function", num_envs=N)
    assert env.reward_manager.components == ["height", "twice_height"]
    _, reward, *_ = env.step(torch.zeros(N, env.action_dim))
    z = env.robot.root_pos_w[:, 2]  # no row reset on the first step
    assert torch.allclose(env.reward_manager.last_components, torch.stack((z, -z), dim=1), atol=1e-6)
    assert torch.allclose(reward, torch.zeros(N), atol=1e-6)
