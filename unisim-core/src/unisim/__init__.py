"""unisim: the versioned SimBackend contract and its adapters (mujoco, mjwarp, genesis)."""

from unisim.capabilities import Capabilities, DataPlane, Feature, ResetPublication
from unisim.contacts import ContactAfterReset, ContactFilter, ContactSensorSpec, ContactView
from unisim.contract import CONTRACT_VERSION, SimBackend
from unisim.devices import resolve_device
from unisim.errors import ContractViolation
from unisim.factory import create_backend
from unisim.height_scan import HeightScanSpec, HeightScanView
from unisim.inventory import (
    ActuatorInfo,
    BodyInfo,
    Inventory,
    JointInfo,
    Keyframe,
    SensorInfo,
    StateWidths,
)
from unisim.scope import backend_scope
from unisim.views import BackendViews

__all__ = [
    "CONTRACT_VERSION", "ActuatorInfo", "BackendViews", "BodyInfo", "Capabilities", "ContactAfterReset",
    "ContactFilter", "ContactSensorSpec", "ContactView", "ContractViolation",
    "DataPlane", "Feature", "HeightScanSpec", "HeightScanView", "Inventory", "JointInfo", "Keyframe", "ResetPublication", "SensorInfo",
    "SimBackend", "StateWidths", "backend_scope", "create_backend", "resolve_device",
]
