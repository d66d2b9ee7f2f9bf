"""Capability declaration: what an adapter promises, validated once, frozen forever.

Code above unisim negotiates on these fields, never on a backend's name.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import torch

from unisim.contacts import ContactAfterReset, ContactFilter
from unisim.errors import ContractViolation


class DataPlane(str, enum.Enum):
    """Where public tensors live relative to physics."""

    DEVICE = "device"  # same device as physics, zero-copy views
    HOST_BRIDGE = "host_bridge"  # physics on CPU; the adapter owns the packed transfers


class ResetPublication(str, enum.Enum):
    """When views of rows written by ``set_state`` become authoritative.

    Both promise the same postcondition for readers: once ``set_state`` returns, every
    public view of those rows is authoritative, with no extra physics step.
    """

    IMMEDIATE = "immediate"  # recomputed inside set_state
    LAZY = "lazy"  # recomputed before the next read of any view


class Feature(str, enum.Enum):
    SENSOR_VIEWS = "sensor_views"
    BODY_VIEWS = "body_views"
    MODEL_FIELD_WRITES = "model_field_writes"
    GRAPH_CAPTURE = "graph_capture"
    DETERMINISTIC = "deterministic"
    # set_state_where queues on the device with no host sync (contract 1.1).
    DEVICE_MASKED_RESET = "device_masked_reset"
    # Contact sensing requested at construction, published in views().contacts (contract 1.3).
    CONTACT_SENSORS = "contact_sensors"
    # Height scans (ray grids cast down onto the static terrain) requested at construction,
    # published in views().height_scans (contract 1.5).
    HEIGHT_SCAN = "height_scan"


@dataclass(frozen=True)
class Capabilities:
    """A frozen, self-validating capability declaration.

    Attributes:
        data_plane: DEVICE or HOST_BRIDGE.
        device: the torch device every public tensor lives on.
        selected_reset_publication: IMMEDIATE or LAZY.
        features: feature flags the adapter implements.
        sensor_kinds: MuJoCo sensor type names (e.g. ``"gyro"``) the adapter publishes in
            ``views().sensordata``; a model holding any other kind is refused at construction.
        model_fields: names accepted by ``set_model_field`` (empty unless MODEL_FIELD_WRITES).
        model_field_minimums: for some writable fields, the lowest value the adapter accepts
            for each element along the field's last axis (contract 1.2), e.g. mjwarp's
            ``geom_friction: (1e-3, 0.0, 0.0)``. ``set_model_field`` refuses lower values when
            validating; a caller that turns validation off must keep to them (unilab's
            model-field events check their ranges against them at construction).
        contact_filters: the ``ContactFilter`` kinds ``contact_sensors`` requests may use
            (contract 1.3; empty unless CONTACT_SENSORS). A request for another kind is refused
            at construction, naming the sensor and this field.
        contact_after_reset: what contact views hold for rows just written by ``set_state``
            or ``set_state_where`` (``ContactAfterReset.CLEARED``: zero force, not in contact,
            until the next step); None exactly when CONTACT_SENSORS is not declared.
    """

    data_plane: DataPlane
    device: torch.device
    selected_reset_publication: ResetPublication
    features: frozenset[Feature] = field(default_factory=frozenset)
    sensor_kinds: frozenset[str] = field(default_factory=frozenset)
    model_fields: frozenset[str] = field(default_factory=frozenset)
    model_field_minimums: Mapping[str, tuple[float, ...]] = field(default_factory=dict, hash=False)
    contact_filters: frozenset[ContactFilter] = field(default_factory=frozenset)
    contact_after_reset: ContactAfterReset | None = None

    def __post_init__(self) -> None:
        def fail(name: str, expected: str, got: object) -> None:
            raise ContractViolation(f"capabilities.{name}: expected {expected}, got {got!r}")

        if not isinstance(self.data_plane, DataPlane):
            fail("data_plane", "a DataPlane", self.data_plane)
        if not isinstance(self.device, torch.device):
            fail("device", "a torch.device", self.device)
        if not isinstance(self.selected_reset_publication, ResetPublication):
            fail("selected_reset_publication", "a ResetPublication", self.selected_reset_publication)
        if not all(isinstance(f, Feature) for f in self.features):
            fail("features", "a set of Feature", self.features)
        # Contradictions a reader could otherwise act on.
        if self.data_plane is DataPlane.HOST_BRIDGE and Feature.GRAPH_CAPTURE in self.features:
            fail("features", "no GRAPH_CAPTURE on a HOST_BRIDGE plane (physics is not on a graph device)",
                 sorted(f.value for f in self.features))
        if self.data_plane is DataPlane.DEVICE and self.device.type == "cpu" and Feature.GRAPH_CAPTURE in self.features:
            fail("features", "no GRAPH_CAPTURE on a cpu device", sorted(f.value for f in self.features))
        if self.data_plane is DataPlane.HOST_BRIDGE and Feature.DEVICE_MASKED_RESET in self.features:
            fail("features", "no DEVICE_MASKED_RESET on a HOST_BRIDGE plane (its state lives on the host)",
                 sorted(f.value for f in self.features))
        has_writes = Feature.MODEL_FIELD_WRITES in self.features
        if has_writes != bool(self.model_fields):
            fail("model_fields", "non-empty exactly when MODEL_FIELD_WRITES is declared", sorted(self.model_fields))
        for name, minimums in self.model_field_minimums.items():
            if name not in self.model_fields:
                fail("model_field_minimums", f"only declared model fields {sorted(self.model_fields)}", name)
            if not (isinstance(minimums, tuple) and minimums
                    and all(isinstance(v, float) and math.isfinite(v) for v in minimums)):
                fail(f"model_field_minimums[{name!r}]", "a non-empty tuple of finite floats", minimums)
        # Read-only, like the rest of the declaration.
        object.__setattr__(self, "model_field_minimums", MappingProxyType(dict(self.model_field_minimums)))
        if bool(self.sensor_kinds) != (Feature.SENSOR_VIEWS in self.features):
            fail("sensor_kinds", "non-empty exactly when SENSOR_VIEWS is declared", sorted(self.sensor_kinds))
        if not (isinstance(self.contact_filters, frozenset)
                and all(isinstance(f, ContactFilter) for f in self.contact_filters)):
            fail("contact_filters", "a frozenset of ContactFilter", self.contact_filters)
        has_contacts = Feature.CONTACT_SENSORS in self.features
        if has_contacts != bool(self.contact_filters):
            fail("contact_filters", "non-empty exactly when CONTACT_SENSORS is declared",
                 sorted(f.value for f in self.contact_filters))
        if self.contact_after_reset is not None and not isinstance(self.contact_after_reset, ContactAfterReset):
            fail("contact_after_reset", "a ContactAfterReset or None", self.contact_after_reset)
        if has_contacts != (self.contact_after_reset is not None):
            fail("contact_after_reset", "set exactly when CONTACT_SENSORS is declared", self.contact_after_reset)

    def has(self, feature: Feature) -> bool:
        return feature in self.features
