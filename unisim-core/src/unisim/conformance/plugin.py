"""pytest plugin (entry point ``pytest11``): options and parametrization of the suite."""

from __future__ import annotations

from pathlib import Path

import pytest

from unisim.conformance import BUILTIN_MODEL


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("unisim", "SimBackend conformance")
    group.addoption("--unisim-backend", default="mujoco", help="comma-separated backend names")
    group.addoption("--unisim-device", default="cpu", help="comma-separated devices (cpu, cuda)")
    group.addoption("--unisim-model", default="builtin",
                    help="comma-separated MJCF paths; 'builtin' is the small model shipped with unisim")
    group.addoption("--unisim-num-envs", default=4, type=int, help="envs per backend")


def _model_param(value: str) -> tuple[str, str]:
    if value == "builtin":
        return "builtin", str(BUILTIN_MODEL)
    return Path(value).stem, value


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    cfg = metafunc.config
    if "conformance_backend" in metafunc.fixturenames:  # cases that bring their own model
        pairs = [(b.strip(), d.strip()) for b in cfg.getoption("--unisim-backend").split(",")
                 for d in cfg.getoption("--unisim-device").split(",")]
        metafunc.parametrize("conformance_backend", pairs, ids=[f"{b}-{d}" for b, d in pairs], scope="module")
    if "conformance_case" not in metafunc.fixturenames:
        return
    cases, ids = [], []
    for backend in cfg.getoption("--unisim-backend").split(","):
        for device in cfg.getoption("--unisim-device").split(","):
            for model in cfg.getoption("--unisim-model").split(","):
                label, path = _model_param(model.strip())
                cases.append((backend.strip(), device.strip(), path))
                ids.append(f"{backend.strip()}-{device.strip()}-{label}")
    metafunc.parametrize("conformance_case", cases, ids=ids, scope="module")
