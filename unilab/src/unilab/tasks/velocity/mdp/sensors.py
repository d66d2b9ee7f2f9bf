"""Sensors of the velocity task."""

from __future__ import annotations

import torch
from unisim import Feature


class _FootTimers:
    """Air and contact time per foot, advanced once per env step from ``contact``."""

    def _init_timers(self, env, feet: int) -> None:
        self.step_dt = env.step_dt
        self.air_time = torch.zeros(env.num_envs, feet, device=env.device)
        self.contact_time = torch.zeros(env.num_envs, feet, device=env.device)

    def update(self, env) -> None:
        contact = self.contact
        # In place: the timers are state carried from step to step, kept at fixed storage.
        self.air_time.add_(self.step_dt).masked_fill_(contact, 0.0)
        self.contact_time.add_(self.step_dt).mul_(contact)  # zero where the foot is in the air

    def reset(self, done: torch.Tensor) -> None:
        mask = done.unsqueeze(1)
        self.air_time.masked_fill_(mask, 0.0)
        self.contact_time.masked_fill_(mask, 0.0)


class FeetContact(_FootTimers):
    """Per-foot contact and air/contact timers, read by the gait rewards and the critic.

    Contact is a height proxy (foot body origin below ``contact_height``): on flat ground
    it needs only body views, which every backend publishes. ``contact`` is derived from
    the current state (so after a reset it shows the new state); the timers advance once
    per env step in ``update`` and restart at zero for rows starting an episode.

    params: bodies (the feet), contact_height (m)."""

    def __init__(self, cfg, env) -> None:
        env.robot.require("FeetContact", (Feature.BODY_VIEWS,))
        self.robot = env.robot
        bodies = tuple(cfg.params["bodies"])
        self.idx = torch.tensor([env.robot.body_index(b, "FeetContact") for b in bodies], device=env.device)
        self.height = float(cfg.params["contact_height"])
        self._init_timers(env, len(bodies))
        self._cache_key = ("feet_contact", id(self))

    @property
    def contact(self) -> torch.Tensor:
        return self.robot.cached(self._cache_key, lambda: self.robot.body_pos_w[:, self.idx, 2] < self.height)

    def foot_lin_vel_xy(self) -> torch.Tensor:
        return self.robot.body_lin_vel_w[:, self.idx, :2]


class FeetContactForce(_FootTimers):
    """The same timers, with contact read from the simulator: a foot is in contact when the
    net force of its contacts with the floor exceeds the contact sensor's threshold. Reads a
    contact sensor the owner asks the backend for (``EnvCfg.contact_sensors``); a backend
    without contact sensing refuses the env at construction. Rows just reset read no contact
    until their first step (the contract's cleared views).

    params: contact_sensor (its name), bodies (the feet, in the sensor's order)."""

    def __init__(self, cfg, env) -> None:
        self.robot = env.robot
        self.sensor = cfg.params["contact_sensor"]
        view = env.robot.contact(self.sensor, "FeetContactForce")
        bodies = tuple(cfg.params["bodies"])
        if tuple(view.spec.bodies) != bodies:
            raise ValueError(f"FeetContactForce: contact sensor {self.sensor!r} senses {list(view.spec.bodies)}, "
                             f"not the feet {list(bodies)}")
        self.idx = torch.tensor([env.robot.body_index(b, "FeetContactForce") for b in bodies], device=env.device)
        self._init_timers(env, len(bodies))

    @property
    def contact(self) -> torch.Tensor:
        return self.robot.contact(self.sensor, "FeetContactForce").in_contact

    def foot_lin_vel_xy(self) -> torch.Tensor:
        return self.robot.body_lin_vel_w[:, self.idx, :2]
