"""Robot-facing view of a backend: name resolution and per-step derived quantities.

Everything reads the public contract only (inventory, capabilities, views). Derived
quantities (body-frame velocities, projected gravity, joint slices) are computed at most
once per state change and cached: terms share them instead of each recomputing.
Root quantities come from the free joint's qpos/qvel (MuJoCo layout is part of the
contract), so they need no optional feature; body poses need BODY_VIEWS.
"""

from __future__ import annotations

import re

import torch
from unisim import Feature, SimBackend

from unilab import math as lm


class MissingCapability(ValueError):
    """A term needs a capability the backend does not declare."""


def index_or_slice(indices: list[int]) -> slice | torch.Tensor | list[int]:
    """A contiguous index list becomes a slice: a view, not a gather, on every read."""
    if indices and indices == list(range(indices[0], indices[-1] + 1)):
        return slice(indices[0], indices[-1] + 1)
    return indices


def _unknown(views, name: str, owner: str, what: str) -> ValueError:
    return ValueError(f"{owner}: unknown {what} {name!r}; configured: {sorted(views)}")


class RobotState:
    def __init__(self, backend: SimBackend) -> None:
        self.backend = backend
        self.capabilities = backend.capabilities
        self.inventory = backend.inventory()
        self.device = backend.device
        self.num_envs = backend.num_envs
        inv = self.inventory
        free = [j for j in inv.joints if j.kind == "free"]
        if len(free) != 1:
            raise ValueError(f"robot: expected exactly one free (floating base) joint, got {[j.name for j in free]}")
        self.root_qpos_adr = free[0].qpos_adr
        self.root_qvel_adr = free[0].qvel_adr
        self.root_body = inv.body(free[0].body).index
        # Actuated joints in ctrl order: this is the action and joint observation order.
        self.actuators = sorted(inv.actuators, key=lambda a: a.index)
        self.joint_names = tuple(a.joint for a in self.actuators)
        joints = [inv.joint(n) for n in self.joint_names]
        self.joint_qpos_index = index_or_slice([j.qpos_adr for j in joints])
        self.joint_qvel_index = index_or_slice([j.qvel_adr for j in joints])
        lo = [j.range[0] if j.range else -float("inf") for j in joints]
        hi = [j.range[1] if j.range else float("inf") for j in joints]
        self.joint_limits = torch.tensor([lo, hi], dtype=torch.float32, device=self.device).T.contiguous()
        self._cache: dict = {}
        self._gravity_read = False  # see _root_vectors_b
        self._views = None
        self._slices: dict[str, torch.Tensor] = {}
        self._fresh = False

    # ---- names --------------------------------------------------------------------
    def find_joints(self, patterns: tuple[str, ...] | list[str] | str, owner: str) -> list[int]:
        """Columns (in action order) of actuated joints matching any regex in ``patterns``."""
        patterns = (patterns,) if isinstance(patterns, str) else tuple(patterns)
        cols = [i for i, n in enumerate(self.joint_names) if any(re.fullmatch(p, n) for p in patterns)]
        if not cols:
            raise ValueError(f"{owner}: no actuated joint matches {list(patterns)}; available: {list(self.joint_names)}")
        return cols

    def body_index(self, name: str, owner: str) -> int:
        names = [b.name for b in self.inventory.bodies]
        if name not in names:
            raise ValueError(f"{owner}: unknown body {name!r}; available bodies: {names}")
        return self.inventory.body(name).index

    def sensor_slice(self, name: str, owner: str) -> slice:
        names = [s.name for s in self.inventory.sensors]
        if name not in names:
            raise ValueError(f"{owner}: unknown sensor {name!r}; available sensors: {names}")
        s = self.inventory.sensor(name)
        return slice(s.adr, s.adr + s.width)

    def require(self, owner: str, features: tuple[Feature, ...] = (), model_fields: tuple[str, ...] = (),
                sensor_kinds: tuple[str, ...] = ()) -> None:
        caps = self.capabilities
        for f in features:
            if not caps.has(f):
                raise MissingCapability(f"{owner}: needs capability feature {f.value!r}, which this backend "
                                        f"does not declare (declared: {sorted(x.value for x in caps.features)})")
        for name in model_fields:
            if name not in caps.model_fields:
                raise MissingCapability(f"{owner}: needs capability model field {name!r} (set_model_field), "
                                        f"which this backend does not declare (declared: {sorted(caps.model_fields)})")
        for kind in sensor_kinds:
            if kind not in caps.sensor_kinds:
                raise MissingCapability(f"{owner}: needs capability sensor kind {kind!r}, which this backend "
                                        f"does not declare (declared: {sorted(caps.sensor_kinds)})")

    # ---- state ----------------------------------------------------------------------
    def invalidate(self) -> None:
        """Physics moved or rows were written: drop derived values. The next read calls
        ``backend.views()`` again, which is what lets a LAZY-publication backend publish."""
        self._cache.clear()
        self._fresh = False

    def _refresh(self) -> None:
        views = self.backend.views()
        if views is not self._views:
            # View tensors live as long as the backend (contract), so their slices do too:
            # slicing once here saves a Python-level index op per read.
            self._views = views
            a, b = self.root_qpos_adr, self.root_qvel_adr
            self._slices = {
                "root_pos_w": views.qpos[:, a:a + 3], "root_quat_w": views.qpos[:, a + 3:a + 7],
                "root_lin_vel_w": views.qvel[:, b:b + 3], "root_ang_vel_b": views.qvel[:, b + 3:b + 6],
            }
            if isinstance(self.joint_qpos_index, slice) and isinstance(self.joint_qvel_index, slice):
                self._slices["joint_pos"] = views.qpos[:, self.joint_qpos_index]
                self._slices["joint_vel"] = views.qvel[:, self.joint_qvel_index]
        self._fresh = True

    @property
    def views(self):
        if not self._fresh:
            self._refresh()
        return self._views

    def _get(self, key, fn) -> torch.Tensor:
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = fn()
        return value

    def _slice(self, key: str) -> torch.Tensor:
        if not self._fresh:
            self._refresh()
        view = self._slices.get(key)
        if view is None:  # non-contiguous joints: a gather is a copy, made once per state
            view = self._get(key, lambda: (self._views.qpos[:, self.joint_qpos_index] if key == "joint_pos"
                                           else self._views.qvel[:, self.joint_qvel_index]))
        return view

    @property
    def qpos(self) -> torch.Tensor:
        return self.views.qpos

    @property
    def qvel(self) -> torch.Tensor:
        return self.views.qvel

    @property
    def root_pos_w(self) -> torch.Tensor:
        return self._slice("root_pos_w")

    @property
    def root_quat_w(self) -> torch.Tensor:
        return self._slice("root_quat_w")

    @property
    def root_lin_vel_w(self) -> torch.Tensor:
        """World-frame velocity of the base origin (free-joint qvel)."""
        return self._slice("root_lin_vel_w")

    @property
    def root_ang_vel_b(self) -> torch.Tensor:
        """Body-frame angular velocity of the base (free-joint qvel)."""
        return self._slice("root_ang_vel_b")

    @property
    def root_lin_vel_b(self) -> torch.Tensor:
        if self._gravity_read:
            return self._root_vectors_b()[:, 0]
        return self._get("root_lin_vel_b", lambda: lm.quat_apply_inverse(self.root_quat_w, self.root_lin_vel_w))

    @property
    def projected_gravity_b(self) -> torch.Tensor:
        """World gravity direction (0, 0, -1) in the base frame."""
        self._gravity_read = True
        return self._root_vectors_b()[:, 1]

    def _root_vectors_b(self) -> torch.Tensor:
        """The base velocity and the gravity direction rotated into the base frame together,
        (N, 2, 3): one rotation's kernels for both, where each alone would cost the same. Until
        a task first reads the gravity direction, the velocity rotates alone (a task that never
        reads it pays no stacking)."""
        def rotate() -> torch.Tensor:
            lin_vel = self.root_lin_vel_w
            down = lm.constant((0.0, 0.0, -1.0), self.device).expand_as(lin_vel)
            return lm.quat_apply_inverse(self.root_quat_w.unsqueeze(1), torch.stack((lin_vel, down), dim=1))
        return self._get("root_vectors_b", rotate)

    @property
    def heading_w(self) -> torch.Tensor:
        return self._get("heading_w", lambda: lm.yaw_from_quat(self.root_quat_w))

    @property
    def joint_pos(self) -> torch.Tensor:
        return self._slice("joint_pos")

    @property
    def joint_vel(self) -> torch.Tensor:
        return self._slice("joint_vel")

    @property
    def body_pos_w(self) -> torch.Tensor:
        return self.views.body_pos_w

    @property
    def body_quat_w(self) -> torch.Tensor:
        return self.views.body_quat_w

    @property
    def body_lin_vel_w(self) -> torch.Tensor:
        return self.views.body_lin_vel_w

    @property
    def body_ang_vel_w(self) -> torch.Tensor:
        return self.views.body_ang_vel_w

    @property
    def sensordata(self) -> torch.Tensor:
        return self.views.sensordata

    def contact(self, name: str, owner: str):
        """The live contact view ``name`` (``force_w`` (N, n, 3), ``in_contact`` (N, n)) the
        env asked the backend for under ``EnvCfg.contact_sensors``."""
        # Read by terms every step through ``views``, which is what lets a lazy-publication backend
        # publish, so terms do not keep the view; the lookup stays inline, the error path is the helper.
        views = self.views.contacts
        if name in views:
            return views[name]
        raise _unknown(views, name, owner, "contact sensor")

    def height_scan(self, name: str, owner: str):
        """The live height scan ``name`` (``distance``, ``hit``, ``hit_z_w``, each (N, nray)) the
        env asked the backend for under ``EnvCfg.height_scans``."""
        views = self.views.height_scans
        if name in views:
            return views[name]
        raise _unknown(views, name, owner, "height scan")

    def cached(self, key: str, fn) -> torch.Tensor:
        """Share a term-defined derived quantity for the current state."""
        return self._get(key, fn)
