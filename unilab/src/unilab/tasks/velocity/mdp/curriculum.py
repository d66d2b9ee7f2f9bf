"""Curriculum of the velocity task."""

from __future__ import annotations

from unilab.tasks.velocity.mdp.commands import UniformVelocityCommand


class command_range_stages:
    """Widen a velocity command's ranges at env-step milestones (mjlab's commands_vel).

    params: command_name, stages = [{"step": int, "lin_vel_x": (lo, hi), ...}, ...].
    Decided on the host step counter, so it never reads the device."""

    def __init__(self, cfg, env) -> None:
        name = cfg.params["command_name"]
        self.command = env.command_manager.term(name, "command_range_stages")
        if not isinstance(self.command, UniformVelocityCommand):
            raise ValueError(f"command {name!r} is a {type(self.command).__name__}; "
                             "command_range_stages sets the ranges of a UniformVelocityCommand")
        self.stages = sorted(cfg.params["stages"], key=lambda s: s["step"])
        for stage in self.stages:
            unknown = set(stage) - {"step", "lin_vel_x", "lin_vel_y", "ang_vel_z"}
            if unknown:
                raise ValueError(f"unknown stage keys {sorted(unknown)}; valid: step, lin_vel_x, lin_vel_y, ang_vel_z")
        self.current = -1

    def __call__(self, env) -> dict[str, float] | None:
        stage = -1
        for i, s in enumerate(self.stages):
            if env.common_step_counter >= s["step"]:
                stage = i
        if stage == self.current:
            return None
        self.current = stage
        merged: dict = {}
        for s in self.stages[:stage + 1]:
            merged.update({k: v for k, v in s.items() if k != "step"})
        self.command.set_ranges(**merged)
        return {"stage": stage}
