"""A test owner with friction randomized at every reset (the controlled owner of conftest plus
one reset-mode model-field event)."""

from __future__ import annotations

from unilab.config import EventTermCfg
from unilab.registry import register_task
from unilab.terms.events import randomize_friction

import unilab


def register_reset_friction_task(name: str, friction_range: tuple[float, float]) -> str:
    """Register ``name``: conftest's ``test_controlled`` owner plus friction randomized at each
    reset over ``friction_range``; returns the name."""

    def owner() -> unilab.config.EnvCfg:
        cfg = unilab.task_config("test_controlled")
        cfg.events["friction"] = EventTermCfg(func=randomize_friction, mode="reset",
                                              params={"range": friction_range})
        return cfg

    register_task(name, owner)
    return name
