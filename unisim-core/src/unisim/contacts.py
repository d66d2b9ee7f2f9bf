"""Contact sensing (contract 1.3): what a caller asks for at construction, and what it reads.

A caller passes ``contact_sensors=[ContactSensorSpec(...), ...]`` to ``create_backend``. Each
spec names the bodies it senses and, optionally, what the other side of a contact must be:

    ContactSensorSpec("feet", bodies=("left_ankle_roll_link", "right_ankle_roll_link"),
                      with_bodies=("world",))                 # the static scene: floor, terrain
    ContactSensorSpec("floor_geom", bodies=(...), with_geoms=("floor",))
    ContactSensorSpec("self", bodies=(...), with_self=True)  # other bodies of the same tree
    ContactSensorSpec("any", bodies=(...))                    # every contact of those bodies

``views().contacts[name]`` is then a ``ContactView`` of live tensors on the backend's device:
``force_w`` (N, n, 3), the net contact force ON each sensed body from the contacts that pass
the filter, world frame, newtons; ``in_contact`` (N, n) bool, ``|force_w| > force_threshold``.

What they hold, on every backend that declares ``Feature.CONTACT_SENSORS``:
- after ``step``: the forces of the constraint solve of the LAST physics substep (the forces
  that moved the bodies into the state the other views show), not a recomputation at the
  new state, which would cost a collision pass and a constraint solve;
- after ``set_state``/``set_state_where``: for the written rows, what
  ``capabilities.contact_after_reset`` declares (``ContactAfterReset.CLEARED``: zero force and
  not in contact until the next step; a new state has had no contact solve yet, and making one
  would be a redundant physics pass); other rows are untouched;
- at construction: zero force, not in contact.

The net force sums contacts vectorially: two contacts pressing a body from opposite sides can
cancel, so ``in_contact`` is a force statement ("is something pushing this body"), like Isaac
Lab's contact sensor, not a geometric one.

Engine-free: names are resolved against a compiled model by the adapters (``unisim.mjcf``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from unisim.errors import ContractViolation
from unisim.requests import named_specs


class ContactFilter(str, enum.Enum):
    """Which contacts of a sensed body count; adapters declare the ones they implement."""

    ANY = "any"  # every contact of the body
    BODIES = "bodies"  # only contacts with geoms of the named bodies ("world": the static scene)
    GEOMS = "geoms"  # only contacts with the named geoms
    SELF = "self"  # only contacts with other bodies of the same kinematic tree (self-collision)


class ContactAfterReset(str, enum.Enum):
    """What contact views hold for rows just written by ``set_state``/``set_state_where``."""

    CLEARED = "cleared"  # zero force, not in contact, until the next step


@dataclass(frozen=True)
class ContactSensorSpec:
    """A request for contact sensing on named bodies, made when the backend is built.

    Attributes:
        name: key of the view in ``views().contacts``.
        bodies: the sensed bodies (row order of the view); not the world body.
        with_bodies: only contacts whose other side is a geom of one of these bodies.
        with_geoms: only contacts whose other side is one of these geoms.
        with_self: only contacts with another body of the sensed body's own kinematic tree.
        force_threshold: newtons; ``in_contact`` is ``|force_w| > force_threshold``.

    At most one of ``with_bodies``, ``with_geoms``, ``with_self`` is given (none: every
    contact); ask for two sensors to read two filters.
    """

    name: str
    bodies: tuple[str, ...]
    with_bodies: tuple[str, ...] = ()
    with_geoms: tuple[str, ...] = ()
    with_self: bool = False
    force_threshold: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ContractViolation(f"ContactSensorSpec.name: expected a non-empty str, got {self.name!r}")
        for arg in ("bodies", "with_bodies", "with_geoms"):
            value = getattr(self, arg)
            if isinstance(value, str) or not isinstance(value, (tuple, list)) \
                    or not all(isinstance(v, str) and v for v in value):
                raise ContractViolation(
                    f"ContactSensorSpec({self.name!r}).{arg}: expected a tuple of names, got {value!r}")
            if len(set(value)) != len(value):
                raise ContractViolation(f"ContactSensorSpec({self.name!r}).{arg}: names repeat in {list(value)}")
            object.__setattr__(self, arg, tuple(value))
        if not self.bodies:
            raise ContractViolation(f"ContactSensorSpec({self.name!r}).bodies: expected at least one body, got ()")
        if not isinstance(self.with_self, bool):
            raise ContractViolation(f"ContactSensorSpec({self.name!r}).with_self: expected a bool, "
                                    f"got {self.with_self!r}")
        given = [arg for arg in ("with_bodies", "with_geoms", "with_self") if getattr(self, arg)]
        if len(given) > 1:
            raise ContractViolation(
                f"ContactSensorSpec({self.name!r}).{given[1]}: contradicts {given[0]}; a sensor has one filter "
                "(request one sensor per filter)")
        threshold = self.force_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold) \
                or threshold < 0:
            raise ContractViolation(f"ContactSensorSpec({self.name!r}).force_threshold: expected a finite number "
                                    f">= 0 (newtons), got {threshold!r}")
        object.__setattr__(self, "force_threshold", float(threshold))

    @property
    def filter(self) -> ContactFilter:
        if self.with_bodies:
            return ContactFilter.BODIES
        if self.with_geoms:
            return ContactFilter.GEOMS
        if self.with_self:
            return ContactFilter.SELF
        return ContactFilter.ANY


@dataclass(frozen=True)
class ContactView:
    """Live contact tensors of one ``ContactSensorSpec`` (see the module docstring).

    force_w (N, n, 3) float32: net contact force on each sensed body, world frame, newtons.
    in_contact (N, n) bool: ``|force_w| > spec.force_threshold``.
    Row j of the second axis is ``spec.bodies[j]``; ``body_ids[j]`` its index in body views.
    """

    spec: ContactSensorSpec
    body_ids: tuple[int, ...]
    force_w: torch.Tensor
    in_contact: torch.Tensor


@dataclass(frozen=True)
class ContactTarget:
    """One (sensed body, other side) pair an adapter sums into a row of the flat contact buffer.

    ``other`` is -1 for ANY, a body index for BODIES, a geom index for GEOMS and the root body
    of the sensed body's tree for SELF (MuJoCo compiled order throughout).
    """

    row: int
    body: int
    filter: ContactFilter
    other: int


@dataclass(frozen=True)
class ContactPlan:
    """A validated request, resolved against a model: what adapters build from.

    Every sensed body of every spec is one row of a flat (N, rows, 3) force buffer; spec k
    owns rows ``slices[k]``. A row sums the forces of its targets (one per filter entry).
    """

    specs: tuple[ContactSensorSpec, ...]
    body_ids: tuple[tuple[int, ...], ...]  # per spec
    slices: tuple[tuple[int, int], ...]  # per spec: [start, stop) of its rows
    targets: tuple[ContactTarget, ...]
    thresholds: tuple[float, ...]  # per row

    @property
    def rows(self) -> int:
        return len(self.thresholds)

    @property
    def filters(self) -> frozenset[ContactFilter]:
        return frozenset(s.filter for s in self.specs)

    def views(self, force_w: torch.Tensor, in_contact: torch.Tensor) -> Mapping[str, ContactView]:
        """Per-spec views (slices, so they stay live) of the flat buffers."""
        return {spec.name: ContactView(spec=spec, body_ids=ids, force_w=force_w[:, a:b], in_contact=in_contact[:, a:b])
                for spec, ids, (a, b) in zip(self.specs, self.body_ids, self.slices, strict=True)}


def in_contact_from_force(force_w: torch.Tensor, thresholds: torch.Tensor, out: torch.Tensor) -> None:
    """``out[:] = |force_w| > thresholds`` with no temporaries kept (torch adapters share it)."""
    torch.gt(torch.linalg.vector_norm(force_w, dim=-1), thresholds, out=out)


def check_requests(contact_sensors: object) -> tuple[ContactSensorSpec, ...]:
    """The model-independent part of a request: a sequence of specs with distinct names."""
    return named_specs(contact_sensors, ContactSensorSpec, "contact_sensors", "sensor")
