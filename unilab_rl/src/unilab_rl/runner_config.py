"""The off-policy runner's own settings (``runner.<key>=<value>`` on the command line): logging,
checkpoints, snapshots and how learning shares the GPU with collection."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from unilab_rl.snapshot_names import snapshot_name


class RunnerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    log_every: int = Field(50, ge=1, description="vectorized env steps between log flushes")
    checkpoint_every: int = Field(5000, ge=1, description="vectorized env steps between checkpoints")
    timing_sample_every: int = Field(10, ge=1, description="steps between phase timings (CUDA events, no sync)")
    snapshot_at_s: tuple[float, ...] = Field((), description="seconds of training (from the first step, "
                                             "resumed sessions included, as the checkpoint's wall_s counts them) "
                                             "after which a copy of the learner is kept as checkpoint-<S>s.pt, "
                                             "to judge how soon a run learned")
    snapshot_at_steps: tuple[int, ...] = Field((), description="env steps of the run (summed over envs, "
                                               "resumed sessions included) after which a copy of the learner "
                                               "is kept as checkpoint-<N>steps.pt: the same judgement by "
                                               "experience, so runs at different speeds (several seeds "
                                               "sharing a GPU) compare")
    overlap_learning: bool = Field(False, description="CUDA only: run the updates on a stream of their own "
                                   "while the next env step runs; the acting policy is one update round stale")
    env_stream_priority: int = Field(-5, le=0, description="with overlap_learning: the CUDA priority of the "
                                     "stream collection runs on; a negative value schedules the env's kernels "
                                     "before the learner's where both wait for the GPU (-5 is the highest on "
                                     "H100 and H200; values past a device's range mean its highest), 0 keeps "
                                     "collection on the caller's stream")

    @field_validator("snapshot_at_s", mode="before")
    @classmethod
    def _from_command_line(cls, value: object) -> object:
        """``runner.snapshot_at_s=90,180`` (brackets optional) arrives as one string."""
        return _listed(value)

    @field_validator("snapshot_at_steps", mode="before")
    @classmethod
    def _steps_from_command_line(cls, value: object) -> object:
        """``runner.snapshot_at_steps=2e7,3e7`` arrives as one string; whole numbers in any
        notation are step counts (what is not a number is left for the field to refuse)."""
        parts = _listed(value)
        if not isinstance(parts, (list, tuple)):
            return parts
        return tuple(_whole_number(part) for part in parts)

    @field_validator("snapshot_at_s", "snapshot_at_steps")
    @classmethod
    def _increasing_positive(cls, value: tuple[float, ...], info: ValidationInfo) -> tuple[float, ...]:
        if any(t <= 0 for t in value) or list(value) != sorted(set(value)):
            unit = "seconds" if info.field_name == "snapshot_at_s" else "env-step counts"
            raise ValueError(f"expected strictly increasing positive {unit}, got {value}")
        if info.field_name == "snapshot_at_s":  # one file per time: a later one would replace an earlier
            names = [snapshot_name(t) for t in value]
            shared = sorted({name for name in names if names.count(name) > 1})
            if shared:
                raise ValueError(f"times {value} would share the snapshot file name(s) {shared}; give times that "
                                 "differ in their first 6 significant digits")
        return value


def _listed(value: object) -> object:
    """"90,180" or "[90, 180]" -> ("90", "180"); anything else unchanged."""
    if isinstance(value, str):
        return tuple(part for part in value.strip("()[] ").replace(" ", "").split(",") if part)
    return value


def _whole_number(part: object) -> object:
    """25e6 or "2.5e7" -> 25000000; anything else unchanged."""
    try:
        number = float(part)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return part
    return int(number) if number.is_integer() else part
