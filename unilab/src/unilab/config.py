"""Owner configuration: pydantic models validated at construction.

A task owner is one flat ``EnvCfg`` whose manager sections are dicts of small term
configs (mjlab style). Variants are plain functions that build and edit a config.
Overrides address any field by a dotted path (``unilab.config_overrides``):
``rewards.velocity.weights.alive=2`` on g1_walk_flat, whose rewards are one fused term with
per-component weights, or ``rewards.alive.weight=2`` on g1_walk_flat_unfused (one term per
reward).

Constraints a config can check by itself are checked here, so an impossible value fails at
construction naming its field instead of producing NaN rewards or observations later:
every float is finite, a ``Range`` is ordered (low <= high), times (event intervals) are
positive, and an event term's range-valued params (``range``, ``*_range``: a (low, high)
pair, or a dict of such pairs per axis) are finite and ordered. What depends on the model
or backend (a mass factor against the backend's declared minimums) is checked by the term
when it is built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from unilab.terrains.config import TerrainCfg


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True,
                              allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic would read True as 1 (decimation=True a decimation of 1); a number field
        # takes numbers only. The field's own validation does the rest.
        if isinstance(value, bool) and _is_a_number_type(cls.model_fields[info.field_name].annotation):
            raise ValueError(f"expected a number, got {value!r}")
        return value


def _is_a_number_type(annotation: Any) -> bool:
    """int, float, or a union holding one of them and no bool (``float | None``, a float or a
    per-joint dict): a bool given there can only have been meant as something else."""
    if annotation in (int, float):
        return True
    if get_origin(annotation) not in (Union, UnionType):
        return False
    args = get_args(annotation)
    return bool not in args and any(a in (int, float) for a in args)


def ordered_range(value: tuple[float, float]) -> tuple[float, float]:
    if not value[0] <= value[1]:
        raise ValueError(f"expected (low, high) with low <= high, got {tuple(value)}")
    return value


def positive_range(value: tuple[float, float]) -> tuple[float, float]:
    ordered_range(value)
    if not value[0] > 0:
        raise ValueError(f"expected a time range with low > 0, got {tuple(value)}")
    return value


Range = Annotated[tuple[float, float], AfterValidator(ordered_range)]  # finite (Strict), low <= high
TimeRange = Annotated[tuple[float, float], AfterValidator(positive_range)]  # seconds, 0 < low <= high


def check_range_param(name: str, value: Any) -> None:
    """A range-valued term param: a finite, ordered (low, high) pair, or a dict of them."""
    if isinstance(value, Mapping):
        for axis, pair in value.items():
            check_range_param(f"{name}.{axis}", pair)
        return
    if not (isinstance(value, list | tuple) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)):
        raise ValueError(f"params.{name}={value!r}: expected a (low, high) pair of numbers")
    low, high = (float(v) for v in value)
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"params.{name}={tuple(value)}: expected finite numbers")
    if low > high:
        raise ValueError(f"params.{name}={tuple(value)}: expected (low, high) with low <= high")


class TermCfg(Strict):
    """A term: a function ``func(env, **params)`` or a class ``func(cfg, env)`` whose
    instances are called like the function. Every manager speaks the same protocol
    (``unilab.managers.base``): the callable, an optional ``reset(done_mask)``, and optional
    ``components`` naming the columns of a fused output."""

    func: Callable[..., Any]
    params: dict[str, Any] = Field(default_factory=dict)


class MirrorCfg(Strict):
    """How a term's columns map under the robot's left-right reflection (``unilab.mirror``):
    ``func(env, width, **params)`` returns, per output column, the source column and its sign
    (``unilab.terms.mirrors``). Declared by a task so that a learner may augment its data
    with mirrored transitions; it changes nothing the env computes."""

    func: Callable[..., Any]
    params: dict[str, Any] = Field(default_factory=dict)


class ObsTermCfg(TermCfg):
    noise: Range | None = None  # uniform additive noise (min, max), drawn from the env RNG
    clip: Range | None = None
    scale: float | None = None
    mirror: MirrorCfg | None = None


class ObsGroupCfg(Strict):
    terms: dict[str, ObsTermCfg]
    enable_corruption: bool = True  # apply the terms' noise
    history_length: int = Field(default=1, ge=1)  # stacked frames, oldest first


class RewardTermCfg(TermCfg):
    """``weight`` for a single-output term; ``weights`` (component -> weight) for a fused
    term returning ``(N, k)`` in the order of its ``components`` (missing components weigh
    0; ``weight`` still scales them all)."""

    weight: float = 1.0
    weights: dict[str, float] | None = None


class TerminationTermCfg(TermCfg):
    """``time_out=True``: truncation (bootstrap), else terminal. A fused term returning
    ``(N, k)`` bool names the components that are time-outs in ``time_out_components``."""

    time_out: bool = False
    time_out_components: tuple[str, ...] = ()


class EventTermCfg(TermCfg):
    """Params named ``range`` or ``*_range`` are ranges: finite, ordered (low, high) pairs
    (or dicts of pairs per axis, like ``push_by_velocity``'s ``velocity_range``)."""

    mode: Literal["startup", "reset", "interval"]
    interval_range_s: TimeRange | None = None  # per-env random period (s), interval mode only

    @model_validator(mode="after")
    def _interval_needs_range(self) -> EventTermCfg:
        if (self.mode == "interval") != (self.interval_range_s is not None):
            raise ValueError("interval_range_s is required for mode='interval' and only allowed there")
        return self

    @model_validator(mode="after")
    def _ranges_are_ordered(self) -> EventTermCfg:
        for name, value in self.params.items():
            if (name == "range" or name.endswith("_range")) and value is not None:
                check_range_param(name, value)
        return self


class SensorCfg(TermCfg):
    """A per-step derived state several terms read (``func`` is its class). The env owns it:
    ``update(env)`` once after physics, ``reset(done)`` once per step in the reset
    transaction; terms find it by name with ``env.sensor(name, owner)``."""


_COMMAND_TYPES: dict[str, type[CommandTermCfg]] = {}


class CommandTermCfg(Strict):
    """Base of every command term's config. A subclass sets ``type`` to a unique literal
    default (its name in overrides and saved configs) and ``term_class`` to the
    ``unilab.managers.command.CommandTerm`` subclass built from it; defining the subclass
    registers it."""

    type: str
    term_class: ClassVar[type]

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.model_fields["type"].default
        if not isinstance(name, str):
            raise TypeError(f"{cls.__name__}: a command config needs a string default for 'type'")
        known = _COMMAND_TYPES.get(name)
        if known is not None and known.__qualname__ != cls.__qualname__:
            raise TypeError(f"command type {name!r} is already registered by {known.__qualname__}")
        _COMMAND_TYPES[name] = cls


def command_types() -> list[str]:
    return sorted(_COMMAND_TYPES)


def _command_cfg(name: str, value: Any) -> Any:
    if isinstance(value, CommandTermCfg) or not isinstance(value, Mapping):
        return value  # instances keep their class; anything else fails the field's type check
    kind = value.get("type")
    cls = _COMMAND_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"commands.{name}: unknown command type {kind!r}; registered types: {command_types()}")
    return cls.model_validate(value)


class ContactSensorCfg(Strict):
    """Contact sensing asked of the backend when it is built (``views().contacts[name]``):
    the net contact force on each of ``bodies`` (world frame) and ``|force| > force_threshold``.
    At most one filter: contacts with ``with_bodies`` (``"world"``: the static scene), with
    ``with_geoms``, or with the robot's own bodies (``with_self``). A backend that does not
    declare contact sensing (or the filter) refuses the env at construction."""

    bodies: tuple[str, ...] = Field(min_length=1)
    with_bodies: tuple[str, ...] = ()
    with_geoms: tuple[str, ...] = ()
    with_self: bool = False
    force_threshold: float = Field(default=1.0, ge=0.0)


class HeightScanCfg(Strict):
    """A height scan asked of the backend when it is built (``views().height_scans[name]``,
    ``unisim.height_scan``): a ``size`` grid of rays every ``resolution`` metres, turning with
    ``body``'s heading, cast straight down from ``offset`` above it onto the static geoms of
    ``geom_groups`` (or the named ``geoms``); no hit reads ``max_distance``. The high default
    start keeps the rays above any terrain the body walks over. A backend that does not declare
    height scans refuses the env at construction."""

    body: str
    size: tuple[float, float] = (1.6, 1.0)
    resolution: float = Field(default=0.1, gt=0.0)
    offset: tuple[float, float, float] = (0.0, 0.0, 20.0)
    max_distance: float = Field(default=30.0, gt=0.0)
    geom_groups: tuple[int, ...] = ()
    geoms: tuple[str, ...] = ()


class ActionCfg(Strict):
    """Joint position targets: ctrl = offset + scale * clip(action)."""

    joint_names: tuple[str, ...] = (".*",)  # regexes over actuator joint names
    scale: float | dict[str, float] = 0.25  # a float or regex -> scale
    use_default_offset: bool = True  # offset = the reset keyframe's joint positions
    clip: Range | None = None
    mirror: MirrorCfg | None = None  # the actions' left-right reflection (see MirrorCfg)


class CurriculumTermCfg(TermCfg):
    pass


class MetricTermCfg(TermCfg):
    pass  # func(env) -> (N,) tensor, averaged over envs and steps between flushes


class RecorderTermCfg(TermCfg):
    capacity: int = Field(default=1000, ge=1)  # steps kept in the on-device ring buffer


EXECUTION_SETTINGS = ("validate_actions", "profile_phases", "cuda_graph")


def task_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A run's env overrides without its execution settings (``EXECUTION_SETTINGS``): what its
    env computed, not how that run's env ran. Play, evaluation and export rebuild the env on a
    device and backend of their own choosing (a CPU export of a policy trained with
    ``cuda_graph=true`` could not graph), so they take these."""
    return {key: value for key, value in overrides.items() if key not in EXECUTION_SETTINGS}


class EnvCfg(Strict):
    scene: Callable[[], Any]  # returns the MJCF path
    terrain: TerrainCfg | None = None  # replaces the scene's ground with a generated grid (unilab.terrains)
    reset_keyframe: str  # the model keyframe every episode starts from (events perturb it)
    decimation: int = Field(default=4, ge=1)
    episode_length_s: float = Field(default=20.0, gt=0.0)
    actions: ActionCfg = Field(default_factory=ActionCfg)
    contact_sensors: dict[str, ContactSensorCfg] = Field(default_factory=dict)
    height_scans: dict[str, HeightScanCfg] = Field(default_factory=dict)
    sensors: dict[str, SensorCfg] = Field(default_factory=dict)
    observations: dict[str, ObsGroupCfg] = Field(default_factory=dict)
    rewards: dict[str, RewardTermCfg] = Field(default_factory=dict)
    reward_scale_by_dt: bool = True  # Isaac Lab / mjlab convention: rewards are rates
    terminations: dict[str, TerminationTermCfg] = Field(default_factory=dict)
    commands: dict[str, SerializeAsAny[CommandTermCfg]] = Field(default_factory=dict)
    events: dict[str, EventTermCfg] = Field(default_factory=dict)
    curriculum: dict[str, CurriculumTermCfg] = Field(default_factory=dict)
    metrics: dict[str, MetricTermCfg] = Field(default_factory=dict)
    recorders: dict[str, RecorderTermCfg] = Field(default_factory=dict)
    backend_options: dict[str, Any] = Field(default_factory=dict)  # e.g. nthread, nconmax
    # How the env runs, not what it computes (EXECUTION_SETTINGS: not in a task's fingerprint).
    # Action/ctrl finiteness checks cost one host sync per step; a proven runner turns
    # them off to keep a DEVICE-plane step sync-free (shape/dtype/device checks stay).
    validate_actions: bool = True
    profile_phases: bool = False  # per-phase timings (CUDA events on GPU), read at flush
    # Replay the step's manager phases from CUDA graphs (unilab.step_graphs): CUDA devices,
    # backends with a device data plane and immediate reset publication, no recorders. It saves
    # the phases' kernel launches, a small share of a step (docs/adr/0007-step-graphs.md).
    cuda_graph: bool = False

    @field_validator("commands", mode="before")
    @classmethod
    def _registered_command_types(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {name: _command_cfg(name, v) for name, v in value.items()}
