"""Reward terms for velocity tracking (the mjlab G1 velocity set, plus alive, terminal
penalty and a biped air-time term), each available unfused and as one fused term.

The unfused terms and ``velocity_rewards`` share the helpers below, so both compute the
same values; the fused term batches the four exp kernels into one op and returns all
components as one (N, k) tensor.
"""

from __future__ import annotations

import re

import torch
from unisim import Feature

from unilab import math as lm


class FeetState:
    """Per-foot contact and air/contact timers, shared by every term that asks for the same
    feet. Contact is a height proxy (foot body origin below ``contact_height``): on flat
    ground it needs only body views, which every backend publishes, instead of contact
    forces, which the contract does not offer. Timers advance once per env step."""

    @staticmethod
    def get(env, bodies: tuple[str, ...], contact_height: float) -> FeetState:
        key = ("feet", tuple(bodies), float(contact_height))
        if key not in env.shared:
            env.shared[key] = FeetState(env, tuple(bodies), float(contact_height))
        return env.shared[key]

    def __init__(self, env, bodies: tuple[str, ...], contact_height: float) -> None:
        env.robot.require("feet", (Feature.BODY_VIEWS,))
        self.robot = env.robot
        self.idx = torch.tensor([env.robot.body_index(b, "feet") for b in bodies], device=env.device)
        self.height = contact_height
        n, f = env.num_envs, len(bodies)
        self.air_time = torch.zeros(n, f, device=env.device)
        self.contact_time = torch.zeros(n, f, device=env.device)
        self._step = -1
        self._last_reset = None

    @property
    def contact(self):
        return self.robot.cached(("contact", id(self)),
                                 lambda: self.robot.body_pos_w[:, self.idx, 2] < self.height)

    def update(self, env) -> None:
        if self._step == env.common_step_counter:
            return
        self._step = env.common_step_counter
        contact = self.contact
        self.air_time = torch.where(contact, 0.0, self.air_time + env.step_dt)
        self.contact_time = torch.where(contact, self.contact_time + env.step_dt, 0.0)

    def foot_lin_vel_xy(self, env) -> torch.Tensor:
        return env.robot.body_lin_vel_w[:, self.idx, :2]

    def reset(self, done: torch.Tensor) -> None:
        if done is self._last_reset:  # several terms share this state: reset it once
            return
        self._last_reset = done
        mask = done.unsqueeze(1)
        self.air_time.masked_fill_(mask, 0.0)
        self.contact_time.masked_fill_(mask, 0.0)


# ---- shared raw quantities ----------------------------------------------------------

def _command_speed(cmd: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(cmd[:, :2], dim=1) + cmd[:, 2].abs()


def lin_vel_error(env, cmd: torch.Tensor) -> torch.Tensor:
    v = env.robot.root_lin_vel_b
    return (cmd[:, :2] - v[:, :2]).square().sum(dim=1) + v[:, 2].square()


def ang_vel_error(env, cmd: torch.Tensor) -> torch.Tensor:
    w = env.robot.root_ang_vel_b
    return (cmd[:, 2] - w[:, 2]).square() + w[:, :2].square().sum(dim=1)


def _tilt(quat: torch.Tensor) -> torch.Tensor:
    return lm.tilt_squared(quat)


class _Posture:
    """Speed-dependent per-joint tolerance (mjlab's variable_posture)."""

    def __init__(self, env, std_standing, std_walking, std_running, walking_threshold, running_threshold):
        names = env.robot.joint_names

        def vec(table: dict[str, float] | float) -> torch.Tensor:
            vals = []
            for j in names:
                if isinstance(table, (int, float)):
                    vals.append(float(table))
                    continue
                hit = [v for p, v in table.items() if re.fullmatch(p, j)]
                if not hit:
                    raise ValueError(f"posture: no std pattern matches joint {j!r}; patterns: {list(table)}")
                vals.append(hit[0])
            return 1.0 / torch.tensor(vals, dtype=torch.float32, device=env.device).square()

        self.inv_var = torch.stack([vec(std_standing), vec(std_walking), vec(std_running)])  # (3, J)
        self.walk, self.run = walking_threshold, running_threshold

    def error(self, env, speed: torch.Tensor) -> torch.Tensor:
        regime = (speed >= self.walk).long() + (speed >= self.run).long()
        err = (env.robot.joint_pos - env.default_joint_pos).square()
        return (err * self.inv_var[regime]).mean(dim=1)


def _joint_limit_violation(env, soft_lo, soft_hi) -> torch.Tensor:
    q = env.robot.joint_pos
    return ((soft_lo - q).clamp(min=0.0) + (q - soft_hi).clamp(min=0.0)).sum(dim=1)


def _soft_limits(env, factor: float):
    lim = env.robot.joint_limits
    mid, half = lim.mean(dim=1), 0.5 * (lim[:, 1] - lim[:, 0]) * factor
    return mid - half, mid + half


def _air_time_biped(feet: FeetState, threshold: float) -> torch.Tensor:
    contact = feet.contact
    in_mode = torch.where(contact, feet.contact_time, feet.air_time)
    single = contact.sum(dim=1) == 1
    return torch.where(single[:, None], in_mode, 0.0).min(dim=1).values.clamp(max=threshold)


def _slip(env, feet: FeetState) -> torch.Tensor:
    return (feet.foot_lin_vel_xy(env).square().sum(dim=2) * feet.contact).sum(dim=1)


# ---- unfused terms ----------------------------------------------------------------

def track_lin_vel(env, std: float, command_name: str = "twist") -> torch.Tensor:
    return torch.exp(-lin_vel_error(env, env.command_manager.command(command_name)) / std**2)


def track_ang_vel(env, std: float, command_name: str = "twist") -> torch.Tensor:
    return torch.exp(-ang_vel_error(env, env.command_manager.command(command_name)) / std**2)


def action_rate_l2(env) -> torch.Tensor:
    am = env.action_manager
    return (am.action - am.prev_action).square().sum(dim=1)


def alive(env) -> torch.Tensor:
    return torch.ones(env.num_envs, device=env.device)


def is_terminated(env) -> torch.Tensor:
    return env.termination_manager.terminated.float()


class upright:
    def __init__(self, cfg, env) -> None:
        env.robot.require("upright", (Feature.BODY_VIEWS,))
        self.body = env.robot.body_index(cfg.params.get("body", "torso_link"), "upright")
        self.inv = 1.0 / cfg.params["std"] ** 2

    def __call__(self, env) -> torch.Tensor:
        return torch.exp(-_tilt(env.robot.body_quat_w[:, self.body]) * self.inv)


class posture:
    def __init__(self, cfg, env) -> None:
        p = dict(cfg.params)
        self.command_name = p.pop("command_name", "twist")
        self.posture = _Posture(env, **p)

    def __call__(self, env) -> torch.Tensor:
        speed = _command_speed(env.command_manager.command(self.command_name))
        return torch.exp(-self.posture.error(env, speed))


class body_ang_vel_xy:
    def __init__(self, cfg, env) -> None:
        env.robot.require("body_ang_vel_xy", (Feature.BODY_VIEWS,))
        self.body = env.robot.body_index(cfg.params.get("body", "torso_link"), "body_ang_vel_xy")

    def __call__(self, env) -> torch.Tensor:
        return env.robot.body_ang_vel_w[:, self.body, :2].square().sum(dim=1)


class joint_pos_limits:
    def __init__(self, cfg, env) -> None:
        self.lo, self.hi = _soft_limits(env, cfg.params.get("soft_factor", 0.9))

    def __call__(self, env) -> torch.Tensor:
        return _joint_limit_violation(env, self.lo, self.hi)


class _FeetTerm:
    def __init__(self, cfg, env) -> None:
        p = cfg.params
        self.feet = FeetState.get(env, tuple(p["bodies"]), p.get("contact_height", 0.06))
        self.command_name = p.get("command_name", "twist")
        self.command_threshold = p.get("command_threshold", 0.1)
        self.threshold = p.get("threshold", 0.4)

    def reset(self, done: torch.Tensor) -> None:
        self.feet.reset(done)

    def active(self, env) -> torch.Tensor:
        return _command_speed(env.command_manager.command(self.command_name)) > self.command_threshold


class feet_air_time(_FeetTerm):
    """Biped single-stance time up to ``threshold`` while a motion is commanded."""

    def __call__(self, env) -> torch.Tensor:
        self.feet.update(env)
        return _air_time_biped(self.feet, self.threshold) * self.active(env)


class foot_slip(_FeetTerm):
    def __call__(self, env) -> torch.Tensor:
        self.feet.update(env)
        return _slip(env, self.feet) * self.active(env)


# ---- fused -----------------------------------------------------------------------------

class velocity_rewards:
    """All velocity-task components in one pass; ``params`` are those of the unfused terms
    (see the g1_walk_flat owner), ``weights`` in the term config pick and weigh them."""

    components = ("track_lin_vel", "track_ang_vel", "upright", "posture", "body_ang_vel", "action_rate",
                  "joint_limits", "feet_air_time", "foot_slip", "alive", "terminated")

    def __init__(self, cfg, env) -> None:
        p = cfg.params
        env.robot.require("velocity_rewards", (Feature.BODY_VIEWS,))
        self.command_name = p.get("command_name", "twist")
        self.torso = env.robot.body_index(p.get("torso_body", "torso_link"), "velocity_rewards")
        dev = env.device
        self.inv_std2 = torch.tensor([1.0 / p["std_lin_vel"] ** 2, 1.0 / p["std_ang_vel"] ** 2,
                                      1.0 / p["std_upright"] ** 2, 1.0], device=dev)
        self.posture = _Posture(env, **p["posture"])
        self.lo, self.hi = _soft_limits(env, p.get("soft_factor", 0.9))
        self.feet = FeetState.get(env, tuple(p["feet"]), p.get("contact_height", 0.06))
        self.air_threshold = p.get("air_time_threshold", 0.4)
        self.command_threshold = p.get("command_threshold", 0.1)
        # Tracking errors as matrix products: twist (v_b, w_b) minus the command placed in
        # the (vx, vy, wz) slots, squared, summed per kernel (lin: 0-2, ang: 3-5).
        self.place = torch.zeros(3, 6, device=dev)
        self.place[0, 0] = self.place[1, 1] = self.place[2, 5] = 1.0
        self.group = torch.zeros(6, 2, device=dev)
        self.group[:3, 0] = self.group[3:, 1] = 1.0
        self.ones = torch.ones(env.num_envs, 1, device=dev)

    def reset(self, done: torch.Tensor) -> None:
        self.feet.reset(done)

    def __call__(self, env) -> torch.Tensor:
        robot, am = env.robot, env.action_manager
        cmd = env.command_manager.command(self.command_name)
        speed = _command_speed(cmd)
        self.feet.update(env)
        twist = torch.cat((robot.root_lin_vel_b, robot.root_ang_vel_b), dim=1)
        tracking = torch.mm((twist - torch.mm(cmd, self.place)).square(), self.group)
        errors = torch.cat((tracking, _tilt(robot.body_quat_w[:, self.torso]).unsqueeze(1),
                            self.posture.error(env, speed).unsqueeze(1)), dim=1)
        kernels = torch.exp(-errors * self.inv_std2)
        active = (speed > self.command_threshold).unsqueeze(1)
        feet = torch.stack((_air_time_biped(self.feet, self.air_threshold), _slip(env, self.feet)), dim=1) * active
        penalties = torch.stack((
            robot.body_ang_vel_w[:, self.torso, :2].square().sum(dim=1),
            (am.action - am.prev_action).square().sum(dim=1),
            _joint_limit_violation(env, self.lo, self.hi)), dim=1)
        return torch.cat((kernels, penalties, feet, self.ones,
                          env.termination_manager.terminated.unsqueeze(1).float()), dim=1)
