"""Sensor manager: named per-step derived state that several terms read.

A sensor (foot contact timers, clip-relative body poses, ...) is a class ``C(cfg, env)``
configured under ``EnvCfg.sensors``. The env owns it: ``update(env)`` runs once right
after physics (before any term reads it), ``reset(done)`` once per step inside the reset
transaction. Terms get it by name in their constructor with ``env.sensor(name, owner)``,
so a term never advances or resets shared state itself.
"""

from __future__ import annotations

import torch

from unilab.config import SensorCfg
from unilab.managers.base import build_term


class SensorManager:
    def __init__(self, cfg: dict[str, SensorCfg], env) -> None:
        terms = [build_term("sensors", name, c, env) for name, c in cfg.items()]
        for t in terms:
            if t.obj is None or not callable(getattr(t.obj, "update", None)):
                raise ValueError(f"sensors term {t.name!r}: a sensor is a class with update(env)")
        self.sensors = {t.name: t.obj for t in terms}
        self._updates = [t.obj.update for t in terms]
        self._resets = [t.reset for t in terms if t.reset is not None]

    def get(self, name: str, owner: str):
        sensor = self.sensors.get(name)
        if sensor is None:
            raise ValueError(f"{owner}: unknown sensor {name!r}; configured sensors: {list(self.sensors)}")
        return sensor

    def update(self, env) -> None:
        for update in self._updates:
            update(env)

    def reset(self, done: torch.Tensor) -> None:
        for reset in self._resets:
            reset(done)
