"""The project's G1 scene, written on top of the pinned robot file.

The robot file stays as shipped; everything task-facing lives here: a floor, position
actuators whose gains derive from each joint's reflected armature (10 Hz natural
frequency, damping ratio 2, the figures Unitree motor specs give), joint armature, the
collision set (feet condim 3 with priority, other capsules condim 1), IMU sensors and
keyframes. Visual meshes are dropped by default (collision capsules are what simulates;
meshes only slow compilation and Genesis loading).
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import mujoco

from unilab.assets.robot_files import asset_root, g1_robot_xml


def _reflected_inertia(rotor: tuple[float, float, float], gears: tuple[float, float, float]) -> float:
    """Two-stage planetary gearbox: rotor inertias reflected through the downstream gears."""
    return rotor[0] * (gears[1] * gears[2]) ** 2 + rotor[1] * gears[2] ** 2 + rotor[2]


_ARMATURE = {
    "5020": _reflected_inertia((0.139e-4, 0.017e-4, 0.169e-4), (1, 1 + 46 / 18, 1 + 56 / 16)),
    "7520_14": _reflected_inertia((0.489e-4, 0.098e-4, 0.533e-4), (1, 4.5, 1 + 48 / 22)),
    "7520_22": _reflected_inertia((0.489e-4, 0.109e-4, 0.738e-4), (1, 4.5, 5)),
    "4010": _reflected_inertia((0.068e-4, 0.0, 0.0), (1, 5, 5)),
}
_EFFORT = {"5020": 25.0, "7520_14": 88.0, "7520_22": 139.0, "4010": 5.0}
NATURAL_FREQ = 2 * math.pi * 10.0
DAMPING_RATIO = 2.0

# (joint-name pattern, motor, count): ankles and waist pitch/roll are 4-bar linkages driven
# by two 5020 motors, approximated at a nominal 1:1 ratio as twice one motor.
_MOTOR_GROUPS = [
    (r".*_(elbow|shoulder_pitch|shoulder_roll|shoulder_yaw|wrist_roll)_joint", "5020", 1),
    (r".*_(hip_pitch|hip_yaw)_joint|waist_yaw_joint", "7520_14", 1),
    (r".*_(hip_roll|knee)_joint", "7520_22", 1),
    (r".*_wrist_(pitch|yaw)_joint", "4010", 1),
    (r"waist_(pitch|roll)_joint|.*_ankle_(pitch|roll)_joint", "5020", 2),
]

KEYFRAMES = {
    "knees_bent": (0.76, {r".*_hip_pitch_joint": -0.312, r".*_knee_joint": 0.669,
                          r".*_ankle_pitch_joint": -0.363, r".*_elbow_joint": 0.6,
                          r"left_shoulder_roll_joint": 0.2, r"right_shoulder_roll_joint": -0.2,
                          r".*_shoulder_pitch_joint": 0.2}),
    "home": (0.783675, {r".*_hip_pitch_joint": -0.1, r".*_knee_joint": 0.3,
                        r".*_ankle_pitch_joint": -0.2, r".*_shoulder_pitch_joint": 0.2,
                        r".*_elbow_joint": 1.28, r"left_shoulder_roll_joint": 0.2,
                        r"right_shoulder_roll_joint": -0.2}),
}

_FOOT_GEOM = re.compile(r"^(left|right)_foot[1-7]_collision$")

G1_JOINT_NAMES: tuple[str, ...] = (
    "left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint",
    "left_ankle_pitch_joint", "left_ankle_roll_joint", "right_hip_pitch_joint", "right_hip_roll_joint",
    "right_hip_yaw_joint", "right_knee_joint", "right_ankle_pitch_joint", "right_ankle_roll_joint",
    "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint", "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint", "left_shoulder_yaw_joint", "left_elbow_joint", "left_wrist_roll_joint",
    "left_wrist_pitch_joint", "left_wrist_yaw_joint", "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint", "right_shoulder_yaw_joint", "right_elbow_joint",
    "right_wrist_roll_joint", "right_wrist_pitch_joint", "right_wrist_yaw_joint",
)


def joint_motor(joint: str) -> tuple[float, float]:
    """(armature, effort limit) of the motor group that drives ``joint``."""
    for pattern, motor, count in _MOTOR_GROUPS:
        if re.fullmatch(pattern, joint):
            return _ARMATURE[motor] * count, _EFFORT[motor] * count
    raise KeyError(f"joint {joint!r} matches no G1 motor group")


def _keyframe_qpos(height: float, pose: dict[str, float]) -> list[float]:
    qpos = [0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0]
    for joint in G1_JOINT_NAMES:
        qpos.append(next((v for pat, v in pose.items() if re.fullmatch(pat, joint)), 0.0))
    return qpos


def build_g1_spec(with_meshes: bool = False) -> mujoco.MjSpec:
    robot = g1_robot_xml()
    spec = mujoco.MjSpec.from_file(str(robot))
    spec.meshdir = str(robot.parent / "assets")
    spec.option.timestep = 0.005
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    for sensor in list(spec.sensors):  # the scene owns the sensors, not the robot file
        spec.delete(sensor)
    if not with_meshes:
        for geom in list(spec.geoms):
            if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
                spec.delete(geom)
        for mesh in list(spec.meshes):
            spec.delete(mesh)
    for geom in spec.geoms:
        if geom.name.endswith("_collision"):
            foot = bool(_FOOT_GEOM.match(geom.name))
            geom.contype, geom.conaffinity = 1, 1
            geom.condim = 3 if foot else 1
            geom.priority = 1 if foot else 0
            if foot:
                geom.friction[0] = 0.6

    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                            contype=1, conaffinity=1, condim=3, friction=[0.6, 0.005, 0.0001])
    spec.worldbody.add_light(pos=[0, 0, 3], dir=[0, 0, -1])

    for joint in G1_JOINT_NAMES:
        armature, effort = joint_motor(joint)
        kp = armature * NATURAL_FREQ**2
        kv = 2.0 * DAMPING_RATIO * armature * NATURAL_FREQ
        spec.joint(joint).armature = armature
        act = spec.add_actuator(name=joint.removesuffix("_joint"), target=joint,
                                trntype=mujoco.mjtTrn.mjTRN_JOINT)
        act.set_to_position(kp=kp, kv=kv)
        act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        act.forcerange = [-effort, effort]

    imu = "imu_in_pelvis"
    spec.add_sensor(name="imu_ang_vel", type=mujoco.mjtSensor.mjSENS_GYRO,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname=imu)
    spec.add_sensor(name="imu_lin_vel", type=mujoco.mjtSensor.mjSENS_VELOCIMETER,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname=imu)
    spec.add_sensor(name="imu_z_axis", type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname=imu)

    for name, (height, pose) in KEYFRAMES.items():
        qpos = _keyframe_qpos(height, pose)
        ctrl = qpos[7:]
        spec.add_key(name=name, qpos=qpos, qvel=[0.0] * 35, ctrl=ctrl)
    return spec


def g1_scene_xml(with_meshes: bool = False) -> str:
    return build_g1_spec(with_meshes).to_xml()


def g1_scene_path(with_meshes: bool = False) -> Path:
    """Write (once per content) and return the G1 scene's MJCF path in the asset cache."""
    xml = g1_scene_xml(with_meshes)
    digest = hashlib.sha256(xml.encode()).hexdigest()[:12]
    path = asset_root() / f"g1_scene_{'meshes_' if with_meshes else ''}{digest}.xml"
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        tmp.write_text(xml)
        tmp.replace(path)
    return path


def g1_action_scale() -> dict[str, float]:
    """0.25 * effort / kp per joint: a unit action moves a joint by a quarter of the
    deflection at which its PD controller saturates (mjlab's G1_ACTION_SCALE)."""
    out = {}
    for joint in G1_JOINT_NAMES:
        armature, effort = joint_motor(joint)
        out[joint] = 0.25 * effort / (armature * NATURAL_FREQ**2)
    return out
