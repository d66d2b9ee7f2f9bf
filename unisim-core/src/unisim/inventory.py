"""Public description of a compiled model: widths, joints, bodies, actuators, sensors.

Every index here is MuJoCo's compiled order, which is the layout of every view on every
backend. Body views include the world body at index 0 (see the contract manifest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class StateWidths(NamedTuple):
    nq: int
    nv: int
    nu: int


@dataclass(frozen=True)
class JointInfo:
    name: str
    kind: str  # "free" | "ball" | "slide" | "hinge"
    body: str
    qpos_adr: int
    qpos_width: int
    qvel_adr: int
    qvel_width: int
    range: tuple[float, float] | None  # None when the joint is unlimited


@dataclass(frozen=True)
class BodyInfo:
    name: str
    index: int  # row in body views (world body is 0)
    parent: int
    mass: float


@dataclass(frozen=True)
class ActuatorInfo:
    name: str
    joint: str
    index: int  # column in ctrl
    ctrl_range: tuple[float, float] | None
    kp: float  # position gain (0 for non-position actuators)
    kv: float  # velocity gain


@dataclass(frozen=True)
class SensorInfo:
    name: str
    kind: str  # MuJoCo sensor type name in lower case, e.g. "gyro"
    width: int
    adr: int  # first column in sensordata
    attachment: str  # name of the object the sensor is attached to (site, body or joint)


@dataclass(frozen=True)
class Keyframe:
    name: str
    qpos: tuple[float, ...]
    qvel: tuple[float, ...]
    ctrl: tuple[float, ...]


@dataclass(frozen=True)
class Inventory:
    widths: StateWidths
    timestep: float
    joints: tuple[JointInfo, ...]
    bodies: tuple[BodyInfo, ...]
    actuators: tuple[ActuatorInfo, ...]
    sensors: tuple[SensorInfo, ...]
    keyframes: tuple[Keyframe, ...]
    body_views_include_world: bool = True

    @property
    def nsensordata(self) -> int:
        return sum(s.width for s in self.sensors)

    def _find(self, items: tuple, name: str, what: str):
        for item in items:
            if item.name == name:
                return item
        raise KeyError(f"unknown {what} {name!r}; available: {[i.name for i in items]}")

    def joint(self, name: str) -> JointInfo:
        return self._find(self.joints, name, "joint")

    def body(self, name: str) -> BodyInfo:
        return self._find(self.bodies, name, "body")

    def actuator(self, name: str) -> ActuatorInfo:
        return self._find(self.actuators, name, "actuator")

    def sensor(self, name: str) -> SensorInfo:
        return self._find(self.sensors, name, "sensor")

    def keyframe(self, name: str) -> Keyframe:
        return self._find(self.keyframes, name, "keyframe")
