"""create_backend: name -> adapter, with the scope gate in front."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Sequence
from pathlib import Path

import torch

from unisim.contacts import ContactSensorSpec, check_requests
from unisim.contract import SimBackend
from unisim.errors import ContractViolation
from unisim.height_scan import HeightScanSpec, check_height_requests
from unisim.scope import backend_scope

# Adapter modules are imported on demand so that a missing engine SDK only breaks its own
# backend. Each module exposes ``make(model, num_envs, device, contact_sensors, height_scans, **options)``.
_ADAPTER_MODULES = {
    "mujoco": "unisim.adapters.mujoco_host",
    "mjwarp": "unisim.adapters.mjwarp",
    "genesis": "unisim.adapters.genesis",
}


def check_backend_name(name: str, argument: str = "name") -> None:
    """Refuse ``name`` unless it is an active backend of this workspace, naming ``argument``
    (a caller that takes the backend under another name checks before building anything)."""
    scope = backend_scope()
    if name in scope.shelved:
        raise ContractViolation(
            f"{argument}: backend {name!r} is gated out of this runtime (shelved in workspace.toml); "
            f"active backends: {list(scope.active)}")
    if name not in scope.active:
        raise ContractViolation(
            f"{argument}: unknown backend {name!r}; valid backends: {list(scope.active)}")


def create_backend(name: str, model: str | Path, num_envs: int, device: str | torch.device | None = None,
                   contact_sensors: Sequence[ContactSensorSpec] = (), height_scans: Sequence[HeightScanSpec] = (),
                   **options) -> SimBackend:
    """Build a backend of ``num_envs`` copies of ``model`` (an MJCF path or XML string).

    ``device=None`` lets the adapter pick its default (see unisim.devices).
    ``contact_sensors`` (contract 1.3) requests contact sensing, published in
    ``views().contacts`` (see unisim.contacts); a request the adapter cannot serve (an
    undeclared filter, unknown names, a contradiction) is refused before anything is built.
    ``height_scans`` (contract 1.5) requests ray grids cast down onto the static terrain,
    published in ``views().height_scans`` (see unisim.height_scan); an adapter that does not
    declare ``Feature.HEIGHT_SCAN``, or a bad request, is refused the same way.
    ``options`` are adapter-specific (e.g. ``nthread`` for mujoco, ``nconmax`` for mjwarp)
    plus ``validate`` (default True).
    """
    check_backend_name(name)
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ContractViolation(f"num_envs: expected an int >= 1, got {num_envs!r}")
    validate = options.get("validate", True)
    if not isinstance(validate, bool):
        raise ContractViolation(f"validate: expected a bool, got {validate!r}")
    specs = check_requests(contact_sensors)
    scans = check_height_requests(height_scans)
    module = importlib.import_module(_ADAPTER_MODULES[name])
    accepted = inspect.signature(module.make).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):  # an adapter with named options only
        valid = sorted(set(accepted) - {"model", "num_envs", "device", "contact_sensors", "height_scans"})
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ContractViolation(f"options: unknown {name} option(s) {unknown}; valid: {valid}")
    return module.make(model=model, num_envs=num_envs, device=device, contact_sensors=specs, height_scans=scans,
                       **options)
