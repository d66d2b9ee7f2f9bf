import dataclasses

import pytest
import torch
from unisim import (
    Capabilities,
    ContactAfterReset,
    ContactFilter,
    ContractViolation,
    DataPlane,
    Feature,
    ResetPublication,
)


def caps(**kw):
    base = dict(data_plane=DataPlane.DEVICE, device=torch.device("cpu"),
                selected_reset_publication=ResetPublication.IMMEDIATE)
    return Capabilities(**{**base, **kw})


def test_valid_declaration_is_frozen():
    c = caps(features=frozenset({Feature.BODY_VIEWS}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.data_plane = DataPlane.HOST_BRIDGE


@pytest.mark.parametrize("kw,field", [
    (dict(data_plane="device"), "data_plane"),
    (dict(device="cpu"), "device"),
    (dict(selected_reset_publication="lazy"), "selected_reset_publication"),
    (dict(features=frozenset({"body_views"})), "features"),
    (dict(data_plane=DataPlane.HOST_BRIDGE, features=frozenset({Feature.GRAPH_CAPTURE})), "features"),
    (dict(features=frozenset({Feature.GRAPH_CAPTURE})), "features"),  # cpu device cannot capture
    (dict(data_plane=DataPlane.HOST_BRIDGE, features=frozenset({Feature.DEVICE_MASKED_RESET})), "features"),
    (dict(features=frozenset({Feature.MODEL_FIELD_WRITES})), "model_fields"),
    (dict(model_fields=frozenset({"geom_friction"})), "model_fields"),
    (dict(sensor_kinds=frozenset({"gyro"})), "sensor_kinds"),
    (dict(model_field_minimums={"geom_friction": (1e-3,)}), "model_field_minimums"),  # not a declared field
    (dict(features=frozenset({Feature.MODEL_FIELD_WRITES}), model_fields=frozenset({"geom_friction"}),
          model_field_minimums={"geom_friction": [1e-3]}), "model_field_minimums"),  # not a tuple
    (dict(features=frozenset({Feature.MODEL_FIELD_WRITES}), model_fields=frozenset({"geom_friction"}),
          model_field_minimums={"geom_friction": (float("nan"),)}), "model_field_minimums"),
    (dict(features=frozenset({Feature.CONTACT_SENSORS}), contact_after_reset=ContactAfterReset.CLEARED),
     "contact_filters"),  # the feature without filters
    (dict(contact_filters=frozenset({ContactFilter.ANY})), "contact_filters"),  # filters without the feature
    (dict(features=frozenset({Feature.CONTACT_SENSORS}), contact_filters=frozenset({"any"}),
          contact_after_reset=ContactAfterReset.CLEARED), "contact_filters"),
    (dict(features=frozenset({Feature.CONTACT_SENSORS}), contact_filters=frozenset({ContactFilter.ANY})),
     "contact_after_reset"),  # what written rows hold must be declared
    (dict(contact_after_reset=ContactAfterReset.CLEARED), "contact_after_reset"),
    (dict(features=frozenset({Feature.CONTACT_SENSORS}), contact_filters=frozenset({ContactFilter.ANY}),
          contact_after_reset="cleared"), "contact_after_reset"),
])
def test_contradictory_or_mistyped_declarations_are_rejected(kw, field):
    with pytest.raises(ContractViolation, match=f"capabilities.{field}"):
        caps(**kw)


def test_declared_model_field_minimums_are_read_only():
    c = caps(features=frozenset({Feature.MODEL_FIELD_WRITES}), model_fields=frozenset({"geom_friction"}),
             model_field_minimums={"geom_friction": (1e-3, 0.0, 0.0)})
    assert c.model_field_minimums["geom_friction"] == (1e-3, 0.0, 0.0)
    with pytest.raises(TypeError):
        c.model_field_minimums["geom_friction"] = (0.0, 0.0, 0.0)


def test_a_contact_declaration_names_its_filters_and_reset_behaviour():
    c = caps(features=frozenset({Feature.CONTACT_SENSORS}), contact_filters=frozenset({ContactFilter.ANY}),
             contact_after_reset=ContactAfterReset.CLEARED)
    assert c.has(Feature.CONTACT_SENSORS) and c.contact_filters == {ContactFilter.ANY}
    assert caps().contact_after_reset is None and not caps().contact_filters
