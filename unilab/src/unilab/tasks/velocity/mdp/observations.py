"""Observations of the velocity task."""

from __future__ import annotations

import torch


class feet_contact:
    """Per-foot contact flag and air/contact time of a ``FeetContact`` sensor; params:
    sensor_name."""

    def __init__(self, cfg, env) -> None:
        self.feet = env.sensor(cfg.params["sensor_name"], "feet_contact")

    def __call__(self, env) -> torch.Tensor:
        f = self.feet
        return torch.cat((f.contact, f.air_time, f.contact_time), dim=1)  # cat makes the bools floats
