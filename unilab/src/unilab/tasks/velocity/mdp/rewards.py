"""Velocity-tracking rewards (mjlab's G1 velocity set plus a biped air-time term), each
available unfused and as one fused term.

The unfused terms and ``velocity_rewards`` share the helpers below, so both compute the
same values; the fused term batches the four exp kernels into one op and returns all
components as one (N, k) tensor. Terms name the command they track (``command_name``)
and gait terms the ``FeetContact`` sensor they read (``sensor_name``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
from unisim import Feature

from unilab import math as lm
from unilab.terms.rewards import joint_limit_violation, soft_joint_limits


def command_speed(cmd: torch.Tensor) -> torch.Tensor:
    return torch.linalg.vector_norm(cmd[:, :2], dim=1) + cmd[:, 2].abs()


# The tracking kernels also count the motion no command asks for: vertical velocity in the
# linear one, roll and pitch rates in the angular one, each squared and weighed by these (mjlab's
# first G1 set weighs both 1; its later one 2 and 0.05, so that the body's rocking while stepping
# costs a turn in place little of its reward).
LIN_VEL_Z_WEIGHT = 1.0
ANG_VEL_XY_WEIGHT = 1.0


def lin_vel_error(env, cmd: torch.Tensor, z_weight: float = LIN_VEL_Z_WEIGHT) -> torch.Tensor:
    v = env.robot.root_lin_vel_b
    return (cmd[:, :2] - v[:, :2]).square().sum(dim=1) + z_weight * v[:, 2].square()


def ang_vel_error(env, cmd: torch.Tensor, xy_weight: float = ANG_VEL_XY_WEIGHT) -> torch.Tensor:
    w = env.robot.root_ang_vel_b
    return (cmd[:, 2] - w[:, 2]).square() + xy_weight * w[:, :2].square().sum(dim=1)


class Posture:
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
        self.thresholds = torch.tensor([walking_threshold, running_threshold], device=env.device)

    def error(self, env, speed: torch.Tensor) -> torch.Tensor:
        # The regime is how many thresholds the speed reaches: 0 standing, 1 walking, 2 running.
        regime = torch.bucketize(speed, self.thresholds, right=True)
        err = (env.robot.joint_pos - env.default_joint_pos).square()
        return (err * self.inv_var[regime]).mean(dim=1)


def air_time_biped(feet, threshold: float) -> torch.Tensor:
    contact = feet.contact
    in_mode = torch.where(contact, feet.contact_time, feet.air_time)
    single = contact.sum(dim=1) == 1
    return (in_mode * single[:, None]).min(dim=1).values.clamp(max=threshold)  # times are >= 0: 0 where not single


def slip(feet) -> torch.Tensor:
    return (feet.foot_lin_vel_xy().square().sum(dim=2) * feet.contact).sum(dim=1)


class _CommandTerm:
    """A term reading one command term, resolved once by name."""

    def __init__(self, cfg, env) -> None:
        self.command = env.command_manager.term(cfg.params["command_name"], type(self).__name__)


# ---- unfused terms ----------------------------------------------------------------

class _TrackingKernel(_CommandTerm):
    """exp(-error / std^2) of a tracking error with an off-axis weight (a subclass names the
    error, its weight's param and default). params: command_name, std, the weight's param."""

    error: Callable[..., torch.Tensor]
    off_axis_param: str
    off_axis_default: float

    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        self.std2 = cfg.params["std"] ** 2
        self.off_axis_weight = cfg.params.get(self.off_axis_param, self.off_axis_default)

    def __call__(self, env) -> torch.Tensor:
        return torch.exp(-self.error(env, self.command.command, self.off_axis_weight) / self.std2)


class track_lin_vel(_TrackingKernel):
    """The linear kernel; z_weight: vertical velocity's weight in the error."""

    error = staticmethod(lin_vel_error)
    off_axis_param, off_axis_default = "z_weight", LIN_VEL_Z_WEIGHT


class track_ang_vel(_TrackingKernel):
    """The angular kernel; xy_weight: roll and pitch rates' weight in the error."""

    error = staticmethod(ang_vel_error)
    off_axis_param, off_axis_default = "xy_weight", ANG_VEL_XY_WEIGHT


class posture(_CommandTerm):
    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        p = {k: v for k, v in cfg.params.items() if k != "command_name"}
        self.posture = Posture(env, **p)

    def __call__(self, env) -> torch.Tensor:
        return torch.exp(-self.posture.error(env, command_speed(self.command.command)))


class _FeetTerm(_CommandTerm):
    """params: command_name, sensor_name (a FeetContact), command_threshold, threshold."""

    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        p = cfg.params
        self.feet = env.sensor(p["sensor_name"], type(self).__name__)
        self.command_threshold = p.get("command_threshold", 0.1)
        self.threshold = p.get("threshold", 0.4)

    def active(self) -> torch.Tensor:
        return command_speed(self.command.command) > self.command_threshold


class feet_air_time(_FeetTerm):
    """Biped single-stance time up to ``threshold`` while a motion is commanded."""

    def __call__(self, env) -> torch.Tensor:
        return air_time_biped(self.feet, self.threshold) * self.active()


class foot_slip(_FeetTerm):
    def __call__(self, env) -> torch.Tensor:
        return slip(self.feet) * self.active()


# ---- fused -----------------------------------------------------------------------------

class velocity_rewards(_CommandTerm):
    """All velocity-task components in one pass; ``params`` are those of the unfused terms
    (see the G1 owner; the tracking kernels' ``z_weight`` and ``xy_weight`` are
    ``lin_vel_z_weight`` and ``ang_vel_xy_weight`` here), ``weights`` in the term config pick and
    weigh them."""

    components = ("track_lin_vel", "track_ang_vel", "upright", "posture", "body_ang_vel", "action_rate",
                  "joint_limits", "feet_air_time", "foot_slip", "alive", "terminated")

    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        p = cfg.params
        env.robot.require("velocity_rewards", (Feature.BODY_VIEWS,))
        self.torso = env.robot.body_index(p["torso_body"], "velocity_rewards")
        dev = env.device
        # exp(error * (-1/std^2)): the sign folded into the constant.
        self.neg_inv_std2 = -torch.tensor([1.0 / p["std_lin_vel"] ** 2, 1.0 / p["std_ang_vel"] ** 2,
                                       1.0 / p["std_upright"] ** 2, 1.0], device=dev)
        self.posture = Posture(env, **p["posture"])
        self.lo, self.hi = soft_joint_limits(env, p.get("soft_factor", 0.9))
        self.feet = env.sensor(p["sensor_name"], "velocity_rewards")
        self.air_threshold = p.get("air_time_threshold", 0.4)
        self.command_threshold = p.get("command_threshold", 0.1)
        # Tracking errors as matrix products: twist (v_b, w_b) minus the command placed in
        # the (vx, vy, wz) slots, squared, summed per kernel (lin: 0-2, ang: 3-5).
        self.place = torch.zeros(3, 6, device=dev)
        self.place[0, 0] = self.place[1, 1] = self.place[2, 5] = 1.0
        # Summed with the off-axis weights: vertical velocity (row 2), roll and pitch rates (3, 4).
        self.group = torch.zeros(6, 2, device=dev)
        self.group[:3, 0] = self.group[3:, 1] = 1.0
        self.group[2, 0] = p.get("lin_vel_z_weight", LIN_VEL_Z_WEIGHT)
        self.group[3:5, 1] = p.get("ang_vel_xy_weight", ANG_VEL_XY_WEIGHT)
        self.ones = torch.ones(env.num_envs, 1, device=dev)

    def __call__(self, env) -> torch.Tensor:
        robot, am = env.robot, env.action_manager
        cmd = self.command.command
        speed = command_speed(cmd)
        twist = torch.cat((robot.root_lin_vel_b, robot.root_ang_vel_b), dim=1)
        tracking = torch.mm((twist - torch.mm(cmd, self.place)).square(), self.group)
        errors = torch.cat((tracking, lm.tilt_squared(robot.body_quat_w[:, self.torso]).unsqueeze(1),
                            self.posture.error(env, speed).unsqueeze(1)), dim=1)
        kernels = torch.exp(errors * self.neg_inv_std2)
        active = (speed > self.command_threshold).unsqueeze(1)
        feet = torch.stack((air_time_biped(self.feet, self.air_threshold), slip(self.feet)), dim=1) * active
        penalties = torch.stack((
            robot.body_ang_vel_w[:, self.torso, :2].square().sum(dim=1),
            (am.action - am.prev_action).square().sum(dim=1),
            joint_limit_violation(env, self.lo, self.hi)), dim=1)
        return torch.cat((kernels, penalties, feet, self.ones,
                          env.termination_manager.terminated.unsqueeze(1)), dim=1)  # cat makes the bool a float
