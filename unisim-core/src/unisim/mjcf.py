"""MJCF loading and the model inventory, shared by every adapter.

All three adapters compile the MJCF with MuJoCo first, so the compiled MjModel is the
single source of layout (qpos, qvel, ctrl, body and sensor order) on every backend.
Engine code: imported only by adapters.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from unisim.errors import ContractViolation
from unisim.inventory import (
    ActuatorInfo,
    BodyInfo,
    Inventory,
    JointInfo,
    Keyframe,
    SensorInfo,
    StateWidths,
)

_JOINT_KINDS = {
    int(mujoco.mjtJoint.mjJNT_FREE): ("free", 7, 6),
    int(mujoco.mjtJoint.mjJNT_BALL): ("ball", 4, 3),
    int(mujoco.mjtJoint.mjJNT_SLIDE): ("slide", 1, 1),
    int(mujoco.mjtJoint.mjJNT_HINGE): ("hinge", 1, 1),
}


def load_spec(model: str | Path) -> mujoco.MjSpec:
    """Parse ``model`` (a path to an MJCF file, or an MJCF XML string) into an MjSpec."""
    if isinstance(model, Path) or (isinstance(model, str) and not model.lstrip().startswith("<")):
        path = Path(model)
        if not path.is_file():
            raise ContractViolation(f"model: MJCF file {str(path)!r} does not exist")
        try:
            return mujoco.MjSpec.from_file(str(path))
        except ValueError as exc:
            raise ContractViolation(f"model: MJCF {str(path)!r} does not parse: {exc}") from exc
    if not isinstance(model, str):
        raise ContractViolation(f"model: expected an MJCF path or XML string, got {type(model).__name__}")
    try:
        return mujoco.MjSpec.from_string(model)
    except ValueError as exc:
        raise ContractViolation(f"model: MJCF string does not parse: {exc}") from exc


def compile_spec(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile, keeping MuJoCo's compiler message in the ContractViolation."""
    try:
        return spec.compile()
    except ValueError as exc:
        raise ContractViolation(f"model: MJCF does not compile: {exc}") from exc


def load_model(model: str | Path) -> mujoco.MjModel:
    """Compile ``model``: a path to an MJCF file, or an MJCF XML string."""
    return compile_spec(load_spec(model))


def sensor_kind(model: mujoco.MjModel, i: int) -> str:
    return mujoco.mjtSensor(int(model.sensor_type[i])).name.removeprefix("mjSENS_").lower()


def check_sensor_kinds(model: mujoco.MjModel, supported: frozenset[str], adapter: str) -> None:
    """Fail closed when the model holds a sensor kind the adapter cannot publish."""
    bad = sorted({sensor_kind(model, i) for i in range(model.nsensor)} - supported)
    if bad:
        raise ContractViolation(
            f"model: sensor kind(s) {bad} are not published by the {adapter} adapter; "
            f"supported kinds: {sorted(supported)}")


def _name(model: mujoco.MjModel, objtype: int, objid: int) -> str:
    return mujoco.mj_id2name(model, objtype, objid) or f"<{mujoco.mjtObj(objtype).name}:{objid}>"


def build_inventory(model: mujoco.MjModel) -> Inventory:
    joints = []
    for j in range(model.njnt):
        kind, qw, vw = _JOINT_KINDS[int(model.jnt_type[j])]
        limited = bool(model.jnt_limited[j])
        joints.append(JointInfo(
            name=_name(model, mujoco.mjtObj.mjOBJ_JOINT, j), kind=kind,
            body=_name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[j])),
            qpos_adr=int(model.jnt_qposadr[j]), qpos_width=qw,
            qvel_adr=int(model.jnt_dofadr[j]), qvel_width=vw,
            range=(float(model.jnt_range[j, 0]), float(model.jnt_range[j, 1])) if limited else None))
    bodies = tuple(
        BodyInfo(name=_name(model, mujoco.mjtObj.mjOBJ_BODY, b), index=b,
                 parent=int(model.body_parentid[b]), mass=float(model.body_mass[b]))
        for b in range(model.nbody))
    actuators = []
    for a in range(model.nu):
        trn = int(model.actuator_trnid[a, 0])
        is_position = int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
        actuators.append(ActuatorInfo(
            name=_name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a),
            joint=_name(model, mujoco.mjtObj.mjOBJ_JOINT, trn), index=a,
            ctrl_range=(float(model.actuator_ctrlrange[a, 0]), float(model.actuator_ctrlrange[a, 1]))
            if bool(model.actuator_ctrllimited[a]) else None,
            kp=float(model.actuator_gainprm[a, 0]) if is_position else 0.0,
            kv=float(-model.actuator_biasprm[a, 2]) if is_position else 0.0))
    sensors = tuple(
        SensorInfo(name=_name(model, mujoco.mjtObj.mjOBJ_SENSOR, s), kind=sensor_kind(model, s),
                   width=int(model.sensor_dim[s]), adr=int(model.sensor_adr[s]),
                   attachment=_name(model, int(model.sensor_objtype[s]), int(model.sensor_objid[s])))
        for s in range(model.nsensor))
    keyframes = tuple(
        Keyframe(name=_name(model, mujoco.mjtObj.mjOBJ_KEY, k) if mujoco.mj_id2name(
                     model, mujoco.mjtObj.mjOBJ_KEY, k) else f"key{k}",
                 qpos=tuple(float(x) for x in model.key_qpos[k]),
                 qvel=tuple(float(x) for x in model.key_qvel[k]),
                 ctrl=tuple(float(x) for x in model.key_ctrl[k]))
        for k in range(model.nkey))
    return Inventory(
        widths=StateWidths(nq=int(model.nq), nv=int(model.nv), nu=int(model.nu)),
        timestep=float(model.opt.timestep), joints=tuple(joints), bodies=bodies,
        actuators=tuple(actuators), sensors=sensors, keyframes=keyframes)
