"""Reward terms any task may use; task-specific ones live with their task (``unilab.tasks``).

The helpers are public so a task's fused term computes exactly what these terms do."""

from __future__ import annotations

import torch
from unisim import Feature

from unilab import math as lm


def joint_limit_violation(env, soft_lo: torch.Tensor, soft_hi: torch.Tensor) -> torch.Tensor:
    q = env.robot.joint_pos
    # How far each joint is outside [lo, hi]: |q - clamp(q, lo, hi)|, four kernels where the
    # two one-sided clamps take six.
    return (q - torch.clamp(q, soft_lo, soft_hi)).abs().sum(dim=1)


def soft_joint_limits(env, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The joint ranges shrunk about their middle by ``factor``; an unlimited joint stays
    unlimited."""
    lim = env.robot.joint_limits
    mid, half = lim.mean(dim=1), 0.5 * (lim[:, 1] - lim[:, 0]) * factor
    # An unlimited joint's range is (-inf, inf): its middle is inf - inf = NaN, and a NaN bound
    # makes every clamp against it (the limit penalty, a reset's joint positions) NaN.
    limited = torch.isfinite(half)
    return torch.where(limited, mid - half, lim[:, 0]), torch.where(limited, mid + half, lim[:, 1])


def action_rate_l2(env) -> torch.Tensor:
    am = env.action_manager
    return (am.action - am.prev_action).square().sum(dim=1)


def alive(env) -> torch.Tensor:
    return torch.ones(env.num_envs, device=env.device)


def is_terminated(env) -> torch.Tensor:
    return env.termination_manager.terminated.float()


class upright:
    """exp(-tilt^2 / std^2) of a body's z axis against world z; params: std, body."""

    def __init__(self, cfg, env) -> None:
        env.robot.require("upright", (Feature.BODY_VIEWS,))
        self.body = env.robot.body_index(cfg.params["body"], "upright")
        self.inv = 1.0 / cfg.params["std"] ** 2

    def __call__(self, env) -> torch.Tensor:
        return torch.exp(-lm.tilt_squared(env.robot.body_quat_w[:, self.body]) * self.inv)


class body_ang_vel_xy:
    """Squared roll/pitch rate (world frame) of a body; params: body."""

    def __init__(self, cfg, env) -> None:
        env.robot.require("body_ang_vel_xy", (Feature.BODY_VIEWS,))
        self.body = env.robot.body_index(cfg.params["body"], "body_ang_vel_xy")

    def __call__(self, env) -> torch.Tensor:
        return env.robot.body_ang_vel_w[:, self.body, :2].square().sum(dim=1)


class joint_pos_limits:
    """Summed violation of the soft joint limits; params: soft_factor."""

    def __init__(self, cfg, env) -> None:
        self.lo, self.hi = soft_joint_limits(env, cfg.params.get("soft_factor", 0.9))

    def __call__(self, env) -> torch.Tensor:
        return joint_limit_violation(env, self.lo, self.hi)
