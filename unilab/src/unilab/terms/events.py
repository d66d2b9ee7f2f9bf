"""Event terms. Reset terms ``f(env, txn)`` write the reset rows of the state
transaction; interval terms ``f(env, txn, fired)`` write its interval rows where
``fired``; startup terms get ``txn=None`` (all rows). Model-field terms declare their
field and fail at construction when the backend does not declare it writable."""

from __future__ import annotations

import torch

from unilab import math as lm


def _uniform(env, n: int, lo, hi) -> torch.Tensor:
    lo = torch.as_tensor(lo, dtype=torch.float32, device=env.device)
    hi = torch.as_tensor(hi, dtype=torch.float32, device=env.device)
    return lo + (hi - lo) * torch.rand((n,) + tuple(lo.shape), generator=env.rng, device=env.device)


def reset_root_yaw(env, txn, yaw_range: tuple[float, float] = (-3.14159, 3.14159)) -> None:
    """Random heading about world z, composed with the keyframe's base orientation."""
    n = txn.num_reset
    a = env.robot.root_qpos_adr
    yaw = _uniform(env, n, yaw_range[0], yaw_range[1])
    q = txn.reset_qpos[:, a + 3:a + 7]
    txn.reset_qpos[:, a + 3:a + 7] = lm.quat_mul(lm.quat_from_yaw(yaw), q)


def reset_joints_offset(env, txn, position_range: tuple[float, float] = (-0.1, 0.1),
                        velocity_range: tuple[float, float] = (0.0, 0.0)) -> None:
    """Uniform offsets on actuated joint positions (kept inside the joint range) and velocities."""
    n, robot = txn.num_reset, env.robot
    j = len(robot.joint_names)
    qpos = txn.reset_qpos[:, robot.joint_qpos_index] + _uniform(env, n, [position_range[0]] * j,
                                                               [position_range[1]] * j)
    lim = robot.joint_limits
    txn.reset_qpos[:, robot.joint_qpos_index] = torch.clamp(qpos, lim[:, 0], lim[:, 1])
    if velocity_range != (0.0, 0.0):
        txn.reset_qvel[:, robot.joint_qvel_index] += _uniform(env, n, [velocity_range[0]] * j,
                                                              [velocity_range[1]] * j)


def push_by_velocity(env, txn, fired, velocity_range: dict[str, tuple[float, float]] | None = None) -> None:
    """Add a random base twist (x y z roll pitch yaw; linear world-frame, angular body-frame
    as in the free joint's qvel) to the rows where the event fired."""
    rng = velocity_range or {}
    keys = ("x", "y", "z", "roll", "pitch", "yaw")
    lo = [rng.get(k, (0.0, 0.0))[0] for k in keys]
    hi = [rng.get(k, (0.0, 0.0))[1] for k in keys]
    n0, n = txn.num_reset, txn.rows.numel()
    a = env.robot.root_qvel_adr
    delta = _uniform(env, n - n0, lo, hi) * fired.unsqueeze(1)
    txn.qvel[n0:, a:a + 6] += delta


class _ModelFieldEvent:
    field = ""

    def __init__(self, cfg, env) -> None:
        env.robot.require(type(self).__name__, model_fields=(self.field,))
        self.default = env.backend.model_field(self.field).clone()
        self.params = cfg.params

    def rows(self, env, txn) -> torch.Tensor:
        return torch.arange(env.num_envs, device=env.device) if txn is None else txn.reset_rows


class randomize_friction(_ModelFieldEvent):
    """Sliding friction of all geoms (or ``geoms`` indices) scaled by one shared random
    factor per env (MuJoCo takes the max of two geoms' friction, so floor and feet move
    together)."""

    field = "geom_friction"

    def __call__(self, env, txn=None) -> None:
        rows = self.rows(env, txn)
        lo, hi = self.params.get("range", (0.5, 1.25))
        values = self.default.index_select(0, rows).clone()
        factor = _uniform(env, rows.numel(), lo, hi)
        geoms = self.params.get("geoms")
        cols = slice(None) if geoms is None else list(geoms)
        values[:, cols, 0] = values[:, cols, 0] * factor[:, None]
        env.backend.set_model_field(self.field, rows, values)


class randomize_body_mass(_ModelFieldEvent):
    """Named bodies' masses scaled by a random factor per env and body."""

    field = "body_mass"

    def __init__(self, cfg, env) -> None:
        super().__init__(cfg, env)
        self.bodies = [env.robot.body_index(b, "randomize_body_mass") for b in cfg.params["bodies"]]

    def __call__(self, env, txn=None) -> None:
        rows = self.rows(env, txn)
        lo, hi = self.params.get("range", (0.9, 1.1))
        values = self.default.index_select(0, rows).clone()
        values[:, self.bodies] = values[:, self.bodies] * _uniform(env, rows.numel(), [lo] * len(self.bodies),
                                                                   [hi] * len(self.bodies))
        env.backend.set_model_field(self.field, rows, values)
