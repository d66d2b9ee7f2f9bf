"""Event terms, all called ``f(env, txn)`` (see ``unilab.managers.event``). Reset terms
write an episode start for every row into ``txn.reset_qpos/reset_qvel`` (only the
resetting rows are committed); interval terms edit ``txn.qvel`` where ``txn.rows`` (the
rows where they fired). Model-field terms draw values for every row and keep the current
ones outside ``txn.rows`` (no row list, so no host sync); they declare their field and
fail at construction when the backend does not declare it writable."""

from __future__ import annotations

import abc

import torch

from unilab.math import constant


def clamp_into_columns(dst: torch.Tensor, cols: slice | list[int], values: torch.Tensor, lo, hi) -> None:
    """``dst[:, cols] = clamp(values, lo, hi)``; contiguous columns (a slice) take the clamp
    straight into the view, one kernel instead of a clamp and a copy."""
    if isinstance(cols, slice):
        torch.clamp(values, lo, hi, out=dst[:, cols])
    else:
        dst[:, cols] = torch.clamp(values, lo, hi)


def uniform(env, shape: tuple[int, ...], lo, width) -> torch.Tensor:
    """U(lo, lo + width) of ``shape`` from the env's generator, advancing it as ``torch.rand(shape)``
    would. ``lo`` and ``width`` are both floats (one kernel: the draw lands in range) or ``lo`` is a
    tensor broadcasting to ``shape`` (one ``addcmul`` after the draw)."""
    if isinstance(lo, torch.Tensor):
        return torch.addcmul(lo, width, torch.rand(shape, generator=env.rng, device=env.device))
    return torch.empty(shape, device=env.device).uniform_(lo, lo + width, generator=env.rng)


# Yaw-about-z quaternion (c, 0, 0, s) times q = c * q + s * (-z, -y, x, w): the Hamilton
# product specialized, 5 ops instead of a general quaternion product's ~30.


def reset_root_yaw(env, txn, yaw_range: tuple[float, float] = (-3.14159, 3.14159)) -> None:
    """Random heading about world z, composed with the keyframe's base orientation."""
    a = env.robot.root_qpos_adr
    half = uniform(env, (txn.reset_qpos.shape[0], 1), 0.5 * yaw_range[0], 0.5 * (yaw_range[1] - yaw_range[0]))
    q = txn.reset_qpos[:, a + 3:a + 7]
    perm = q.index_select(1, constant((3, 2, 1, 0), q.device, torch.int64)) * constant((-1.0, -1.0, 1.0, 1.0), q.device)
    torch.addcmul(q * torch.cos(half), perm, torch.sin(half), out=q)  # q is read before it is written


def reset_joints_offset(env, txn, position_range: tuple[float, float] = (-0.1, 0.1),
                        velocity_range: tuple[float, float] = (0.0, 0.0)) -> None:
    """Uniform offsets on actuated joint positions (kept inside the joint range) and velocities."""
    n, robot = txn.reset_qpos.shape[0], env.robot
    shape = (n, len(robot.joint_names))
    qpos = txn.reset_qpos[:, robot.joint_qpos_index] + uniform(env, shape, position_range[0],
                                                                position_range[1] - position_range[0])
    clamp_into_columns(txn.reset_qpos, robot.joint_qpos_index, qpos, robot.joint_limits[:, 0], robot.joint_limits[:, 1])
    if tuple(velocity_range) != (0.0, 0.0):
        txn.reset_qvel[:, robot.joint_qvel_index] += uniform(env, shape, velocity_range[0],
                                                             velocity_range[1] - velocity_range[0])


class push_by_velocity:
    """Add a random base twist (x y z roll pitch yaw; linear world-frame, angular body-frame
    as in the free joint's qvel) to the interval rows where the event fired."""

    def __init__(self, cfg, env) -> None:
        rng = cfg.params.get("velocity_range") or {}
        keys = ("x", "y", "z", "roll", "pitch", "yaw")
        unknown = set(rng) - set(keys)
        if unknown:
            raise ValueError(f"velocity_range: unknown axes {sorted(unknown)}; valid: {list(keys)}")
        self.lo = torch.tensor([rng.get(k, (0.0, 0.0))[0] for k in keys], device=env.device)
        self.width = torch.tensor([rng.get(k, (0.0, 0.0))[1] for k in keys], device=env.device) - self.lo

    def __call__(self, env, txn) -> None:
        a, fired = env.robot.root_qvel_adr, txn.rows
        txn.qvel[:, a:a + 6].addcmul_(uniform(env, (fired.shape[0], 6), self.lo, self.width), fired.unsqueeze(1))


class _ModelFieldEvent(abc.ABC):
    """Writes a model field from a random draw per env: by default a factor from ``params.range``.

    A subclass names its ``field`` and default range and says how a draw of ``factor_shape``
    becomes the field's values (``scaled``); one whose draw is not a single range (per-axis
    offsets) says so in ``draw_bounds``. The env skips the backend's per-write checks (a hot
    loop), so construction proves once that neither end of the draw writes below the backend's
    declared minimums for the field."""

    field = ""
    default_range = (1.0, 1.0)
    writes_model_field = True  # startup or reset mode only: an interval write would change physics mid-episode

    def __init__(self, cfg, env) -> None:
        env.robot.require(type(self).__name__, model_fields=(self.field,))
        self.default = env.backend.model_field(self.field).clone()
        self.params = cfg.params
        self.range = tuple(self.params.get("range", self.default_range))
        self.all_rows = torch.arange(env.num_envs, device=env.device)
        self._check_range_against_backend_minimums(env)

    def factor_shape(self, env) -> tuple[int, ...]:
        return (env.num_envs,)

    @abc.abstractmethod
    def scaled(self, factor: torch.Tensor) -> torch.Tensor:
        """The field's values for every row when the drawn factors are ``factor``."""

    def draw_bounds(self, env) -> tuple[float | torch.Tensor, float | torch.Tensor]:
        """The draw's low and high ends, floats or tensors broadcasting to ``factor_shape``."""
        return self.range

    def __call__(self, env, txn) -> None:
        lo, hi = self.draw_bounds(env)
        self.write(env, txn, self.scaled(uniform(env, self.factor_shape(env), lo, hi - lo)))

    def write(self, env, txn, values: torch.Tensor) -> None:
        """Write ``values`` (N, ...) for every row; rows outside ``txn.rows`` (at reset,
        rows not starting an episode) keep their current values."""
        keep = ~txn.rows.view(-1, *([1] * (values.dim() - 1)))
        values = torch.where(keep, env.backend.model_field(self.field), values)
        env.backend.set_model_field(self.field, self.all_rows, values)

    def _check_range_against_backend_minimums(self, env) -> None:
        minimums = env.backend.capabilities.model_field_minimums.get(self.field)
        if minimums is None:
            return
        low = torch.tensor(minimums, device=env.device)
        for end in self.draw_bounds(env):  # values are linear in the draw, so its ends bound every write
            values = self.scaled(torch.zeros(self.factor_shape(env), device=env.device) + end)
            margin = float((values - low).amin())  # construction: one sync per end is fine
            if margin < 0:
                declared = (f"{minimums} (along the last axis)" if len(minimums) <= 4 else
                            f"(per element, {min(minimums):g} to {max(minimums):g})")
                raise ValueError(
                    f"{type(self).__name__}: range {self.range} writes {self.field} {-margin:g} below the "
                    f"backend's declared minimums {declared} at factor {end}; raise the range's low end")


def _body_rows(env, names, owner: str) -> torch.Tensor:
    """Body indices as one device tensor, built once: a reset-mode event indexes with it every
    step, and a Python list would be copied to the device at each use."""
    return torch.tensor([env.robot.body_index(b, owner) for b in names], device=env.device, dtype=torch.long)


class randomize_friction(_ModelFieldEvent):
    """Sliding friction of all geoms (or ``geoms`` indices) scaled by one shared random
    factor per env (MuJoCo takes the max of two geoms' friction, so floor and feet move
    together)."""

    field = "geom_friction"
    default_range = (0.5, 1.25)

    def scaled(self, factor: torch.Tensor) -> torch.Tensor:
        values = self.default.clone()
        geoms = self.params.get("geoms")
        cols = slice(None) if geoms is None else list(geoms)
        values[:, cols, 0] = values[:, cols, 0] * factor[:, None]
        return values


class randomize_body_mass(_ModelFieldEvent):
    """Named bodies' masses scaled by a random factor per env and body."""

    field = "body_mass"
    default_range = (0.9, 1.1)

    def __init__(self, cfg, env) -> None:
        self.bodies = _body_rows(env, cfg.params["bodies"], "randomize_body_mass")
        super().__init__(cfg, env)
        if not self.range[0] > 0:  # a body with mass scaled to 0 or below makes the row's state NaN
            raise ValueError(f"params.range={self.range}: mass factors must be > 0 so every body keeps a "
                             "positive mass")

    def factor_shape(self, env) -> tuple[int, ...]:
        return (env.num_envs, len(self.bodies))

    def scaled(self, factor: torch.Tensor) -> torch.Tensor:
        values = self.default.clone()
        values[:, self.bodies] = values[:, self.bodies] * factor
        return values


class randomize_com(_ModelFieldEvent):
    """Named bodies' centres of mass (``body_ipos``, in the body frame) moved by a random offset
    per env, body and axis: ``params.offset_range`` maps ``x``/``y``/``z`` to (low, high) in
    metres (an axis left out stays put). A robot's real mass distribution differs from its
    model's; mjlab's G1 tracking moves the torso's by up to 2.5 cm forward and 5 cm sideways
    and up."""

    field = "body_ipos"
    default_range = (0.0, 0.0)  # unused: the draw is per axis (draw_bounds)
    AXES = ("x", "y", "z")

    def __init__(self, cfg, env) -> None:
        unknown = sorted(set(cfg.params) - {"bodies", "offset_range"})
        if unknown:
            raise ValueError(f"randomize_com: unknown params {unknown}; expected bodies and offset_range")
        ranges = dict(cfg.params.get("offset_range", {}))
        if set(ranges) - set(self.AXES):
            raise ValueError(f"randomize_com: params.offset_range keys {sorted(ranges)}; expected some of x, y, z")
        bounds = [tuple(ranges.get(axis, (0.0, 0.0))) for axis in self.AXES]  # pairs ordered by EventTermCfg
        self.bodies = _body_rows(env, cfg.params["bodies"], "randomize_com")
        self.low = torch.tensor([b[0] for b in bounds], device=env.device)
        self.high = torch.tensor([b[1] for b in bounds], device=env.device)
        super().__init__(cfg, env)

    def draw_bounds(self, env) -> tuple[torch.Tensor, torch.Tensor]:
        return self.low, self.high

    def factor_shape(self, env) -> tuple[int, ...]:
        return (env.num_envs, len(self.bodies), 3)

    def scaled(self, offset: torch.Tensor) -> torch.Tensor:
        values = self.default.clone()
        values[:, self.bodies] = values[:, self.bodies] + offset
        return values

