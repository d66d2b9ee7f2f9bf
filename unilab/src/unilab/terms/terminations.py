"""Termination terms: each returns (N,) bool.

A limit is written as "not within it" (``~(x <= limit)``), not as "beyond it" (``x > limit``):
a world whose simulation diverged holds NaN, which fails every comparison, and would otherwise
never end its episode (it would run, NaN, until its time-out). One more elementwise op each."""

from __future__ import annotations

import math

import torch


def time_out(env) -> torch.Tensor:
    return env.episode_length >= env.max_episode_length


def bad_orientation(env, limit_angle: float = math.radians(70.0)) -> torch.Tensor:
    """Base tilt beyond ``limit_angle``: acos(-g_z) > limit, written without the acos."""
    return ~(env.robot.projected_gravity_b[:, 2] <= -math.cos(limit_angle))


def base_height_below(env, min_height: float = 0.35) -> torch.Tensor:
    return ~(env.robot.root_pos_w[:, 2] >= min_height)
