"""The fixtures every conformance module shares: the case under test (backend name, device,
model), its env count, the backend built from them, and the mujoco adapter on the CPU as the
reference for kinematics and sensors."""

from __future__ import annotations

import pytest

import unisim


@pytest.fixture(scope="module")
def case(conformance_case):
    return conformance_case


@pytest.fixture(scope="module")
def num_envs(request) -> int:
    return request.config.getoption("--unisim-num-envs")


@pytest.fixture(scope="module")
def backend(case, num_envs):
    name, device, model = case
    b = unisim.create_backend(name, model=model, num_envs=num_envs, device=device)
    yield b
    b.close()


@pytest.fixture(scope="module")
def reference(case, num_envs):
    """The mujoco adapter on cpu: the reference for kinematics and sensors."""
    _, _, model = case
    b = unisim.create_backend("mujoco", model=model, num_envs=num_envs, device="cpu", nthread=1)
    yield b
    b.close()
