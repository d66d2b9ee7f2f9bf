"""Each adapter's declared features on the CPU, pinned.

The conformance suite skips the checks of a feature a backend does not declare (determinism,
sensors, graph capture), so a declaration dropped by mistake would turn those checks into skips
and leave the suite green. These tests fail instead.
"""

from __future__ import annotations

import pytest
import unisim
from unisim.capabilities import Feature

# The built-in model has sensors, so SENSOR_VIEWS is declared wherever the adapter publishes them.
EXPECTED_ON_CPU = {
    "mujoco": {Feature.BODY_VIEWS, Feature.MODEL_FIELD_WRITES, Feature.DETERMINISTIC, Feature.CONTACT_SENSORS,
               Feature.SENSOR_VIEWS, Feature.HEIGHT_SCAN},
    # warp's CPU device runs kernels serially, so it repeats bit for bit; no CUDA graph on the CPU.
    "mjwarp": {Feature.BODY_VIEWS, Feature.MODEL_FIELD_WRITES, Feature.DEVICE_MASKED_RESET, Feature.CONTACT_SENSORS,
               Feature.SENSOR_VIEWS, Feature.DETERMINISTIC, Feature.HEIGHT_SCAN},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_ON_CPU))
def test_an_adapter_declares_exactly_its_features_on_the_cpu(name, builtin_model):
    if name == "mjwarp":
        pytest.importorskip("mujoco_warp")
    backend = unisim.create_backend(name, model=builtin_model, num_envs=2, device="cpu")
    try:
        assert set(backend.capabilities.features) == EXPECTED_ON_CPU[name]
    finally:
        backend.close()
