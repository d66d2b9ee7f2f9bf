"""Observation terms. Each returns (N, d) float32 for the current state."""

from __future__ import annotations

import torch
from unisim import Feature


def base_ang_vel(env) -> torch.Tensor:
    """Body-frame angular velocity of the floating base (free-joint qvel; no feature needed)."""
    return env.robot.root_ang_vel_b


def base_lin_vel(env) -> torch.Tensor:
    return env.robot.root_lin_vel_b


def projected_gravity(env) -> torch.Tensor:
    return env.robot.projected_gravity_b


def base_height(env) -> torch.Tensor:
    return env.robot.root_pos_w[:, 2:3]


def joint_pos_rel(env) -> torch.Tensor:
    return env.robot.joint_pos - env.default_joint_pos


def joint_vel(env) -> torch.Tensor:
    return env.robot.joint_vel


def last_action(env) -> torch.Tensor:
    return env.action_manager.action


class generated_commands:
    """The current tensor of a named command term; params: command_name."""

    def __init__(self, cfg, env) -> None:
        self.command = env.command_manager.term(cfg.params["command_name"], "generated_commands")

    def __call__(self, env) -> torch.Tensor:
        return self.command.command


class sensor:
    """A named MJCF sensor's columns; needs SENSOR_VIEWS and the sensor's kind."""

    def __init__(self, cfg, env) -> None:
        name = cfg.params["name"]
        robot = env.robot
        sl = robot.sensor_slice(name, "sensor")
        kind = robot.inventory.sensor(name).kind
        robot.require("sensor", (Feature.SENSOR_VIEWS,), sensor_kinds=(kind,))
        self.cols = sl

    def __call__(self, env) -> torch.Tensor:
        return env.robot.sensordata[:, self.cols]


class body_height:
    """World z of named bodies (e.g. feet), privileged; needs BODY_VIEWS."""

    def __init__(self, cfg, env) -> None:
        env.robot.require("body_height", (Feature.BODY_VIEWS,))
        self.idx = torch.tensor([env.robot.body_index(b, "body_height") for b in cfg.params["bodies"]],
                                device=env.device)

    def __call__(self, env) -> torch.Tensor:
        return env.robot.body_pos_w[:, self.idx, 2]


class height_scan:
    """The terrain around a body, from a height scan (``EnvCfg.height_scans``): per ray, the
    body's height above the terrain under the ray, less ``offset`` (Isaac Lab's ``height_scan``;
    the G1's pelvis over level ground reads about 0.76 - 0.5). A ray that hits nothing reads its
    reach, which a clip bounds. params: scan (its name), offset (m, default 0.5)."""

    def __init__(self, cfg, env) -> None:
        env.robot.require("height_scan", (Feature.HEIGHT_SCAN,))
        self.name = cfg.params["scan"]
        view = env.robot.height_scan(self.name, "height_scan")
        # body z - hit z = distance - the rays' start above the body, so one subtraction per step.
        self.lift = float(view.spec.offset[2]) + float(cfg.params.get("offset", 0.5))

    def __call__(self, env) -> torch.Tensor:
        return env.robot.height_scan(self.name, "height_scan").distance - self.lift
