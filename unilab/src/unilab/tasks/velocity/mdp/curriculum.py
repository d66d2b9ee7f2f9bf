"""Curriculum of the velocity task."""

from __future__ import annotations

from unilab.config import check_range_param
from unilab.tasks.velocity.mdp.commands import UniformVelocityCommand

RANGE_KEYS = ("lin_vel_x", "lin_vel_y", "ang_vel_z")


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
        stages = cfg.params["stages"]
        for i, stage in enumerate(stages):
            _check_stage(i, stage)
        self.stages = sorted(stages, key=lambda s: s["step"])
        _check_first_stage_keeps_the_commands_ranges(self.stages, name, self.command)
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


def _check_stage(index: int, stage: object) -> None:
    """A stage is a dict with an int ``step`` >= 0 and finite, ordered ranges of known axes."""
    where = f"stages[{index}]"
    if not isinstance(stage, dict):
        raise ValueError(f"params.{where}={stage!r}: expected a dict with 'step' and ranges")
    unknown = set(stage) - {"step", *RANGE_KEYS}
    if unknown:
        raise ValueError(f"params.{where}: unknown keys {sorted(unknown)}; valid: step, {', '.join(RANGE_KEYS)}")
    step = stage.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"params.{where}.step={step!r}: expected an int >= 0 (vectorized env steps)")
    for key in RANGE_KEYS:
        if key in stage:
            check_range_param(f"{where}.{key}", stage[key])


def _check_first_stage_keeps_the_commands_ranges(stages: list[dict], name: str,
                                                 command: UniformVelocityCommand) -> None:
    """A stage at step 0 sets the command's ranges on the first step. Where it would change a
    range the command was configured with (an override of ``commands.<name>``), the override
    would be gone after one step without a word: refuse instead, naming both."""
    if not stages or stages[0]["step"] != 0:
        return
    for axis, key in enumerate(RANGE_KEYS):
        if key in stages[0] and tuple(map(float, stages[0][key])) != command.ranges[axis]:
            raise ValueError(
                f"commands.{name}.{key}={command.ranges[axis]} is replaced on the first step by the "
                f"curriculum's stage at step 0 ({key}={tuple(stages[0][key])}); give the stages that range "
                f"too (params.stages) or drop the curriculum (curriculum.<term>=None)")
