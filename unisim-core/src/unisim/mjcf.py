"""MJCF loading and the model inventory, shared by every adapter.

All three adapters compile the MJCF with MuJoCo first, so the compiled MjModel is the
single source of layout (qpos, qvel, ctrl, body and sensor order) on every backend.
Engine code: imported only by adapters.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import torch

from unisim.capabilities import Feature
from unisim.contacts import (
    ContactFilter,
    ContactPlan,
    ContactSensorSpec,
    ContactTarget,
    check_requests,
)
from unisim.errors import ContractViolation
from unisim.height_scan import HeightScanPlan, check_height_requests
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


# The lightest mass a massive body may be written (kg). Zero or negative mass on a body that
# has one turns its world's state NaN within steps; bodies the model leaves massless (the
# world body, pure frames) stay writable at 0.
MIN_BODY_MASS = 1e-6


def body_mass_minimums(model: mujoco.MjModel) -> tuple[float, ...]:
    """Per-body lowest writable mass, in body order (the field's last axis)."""
    return tuple(0.0 if float(m) == 0.0 else MIN_BODY_MASS for m in model.body_mass)


def subtree_membership(body_parentid) -> torch.Tensor:
    """(nbody, nbody) float32 matrix whose [j, b] is 1 when body j is in the subtree of body b
    (b itself included): ``body_mass @ it`` is MuJoCo's ``body_subtreemass``."""
    parents = [int(p) for p in body_parentid]
    member = torch.zeros(len(parents), len(parents))
    for j in range(len(parents)):
        b = j
        while True:  # j, its parent, ... up to the world body, its own parent
            member[j, b] = 1.0
            if b == 0:
                break
            b = parents[b]
    return member


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


# ---- contact sensing (contract 1.3) -----------------------------------------------------
def resolve_contact_sensors(requests: object, model: mujoco.MjModel, supported: frozenset[ContactFilter],
                            adapter: str) -> ContactPlan:
    """Validate ``contact_sensors`` against ``model`` and what the adapter declares.

    Raises ContractViolation naming the sensor and argument before anything is built.
    """
    specs = check_requests(requests)
    body_names = [_name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(model.nbody)]
    bodies = {name: b for b, name in enumerate(body_names)}
    geoms = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g): g for g in range(model.ngeom)}
    geoms.pop(None, None)
    body_ids, slices, targets, thresholds = [], [], [], []
    for spec in specs:
        where = f"contact_sensors[{spec.name!r}]"
        if spec.filter not in supported:
            raise ContractViolation(
                f"{where}: filter {spec.filter.value!r} is not provided by the {adapter} adapter "
                f"(capabilities.contact_filters: {sorted(f.value for f in supported)})")
        ids = tuple(_lookup(bodies, name, f"{where}.bodies", "body") for name in spec.bodies)
        if 0 in ids:
            raise ContractViolation(f"{where}.bodies: the world body holds the static scene and is not sensed; "
                                    "sense the bodies touching it (with_bodies=('world',))")
        others = _filter_targets(spec, model, ids, bodies, geoms, where)
        start = len(thresholds)
        for j, body in enumerate(ids):
            row = start + j
            for other in others(body):
                targets.append(ContactTarget(row=row, body=body, filter=spec.filter, other=other))
            thresholds.append(spec.force_threshold)
        body_ids.append(ids)
        slices.append((start, len(thresholds)))
    return ContactPlan(specs=specs, body_ids=tuple(body_ids), slices=tuple(slices), targets=tuple(targets),
                       thresholds=tuple(thresholds))


def _lookup(table: dict[str, int], name: str, where: str, what: str) -> int:
    if name not in table:
        raise ContractViolation(f"{where}: unknown {what} {name!r}; {what} names: {sorted(table)}")
    return table[name]


def _filter_targets(spec: ContactSensorSpec, model: mujoco.MjModel, ids: tuple[int, ...], bodies: dict[str, int],
                    geoms: dict[str, int], where: str):
    """For each sensed body, the ``other`` ids of its targets (see ContactTarget)."""
    sensed = set(ids)
    if spec.filter is ContactFilter.BODIES:
        others = [_lookup(bodies, name, f"{where}.with_bodies", "body") for name in spec.with_bodies]
        clash = sorted(spec.with_bodies[k] for k, b in enumerate(others) if b in sensed)
        if clash:
            raise ContractViolation(f"{where}.with_bodies: {clash} are also sensed bodies; a body has no "
                                    "contact with itself (use with_self for contacts inside the robot)")
        return lambda body: others
    if spec.filter is ContactFilter.GEOMS:
        others = [_lookup(geoms, name, f"{where}.with_geoms", "geom") for name in spec.with_geoms]
        clash = sorted(spec.with_geoms[k] for k, g in enumerate(others) if int(model.geom_bodyid[g]) in sensed)
        if clash:
            raise ContractViolation(f"{where}.with_geoms: {clash} belong to sensed bodies; a body has no "
                                    "contact with itself")
        return lambda body: others
    if spec.filter is ContactFilter.SELF:
        return lambda body: [int(model.body_rootid[body])]
    return lambda body: [-1]


_CONTACT_SENSOR_PREFIX = "unisim_contact_"
_REFTYPE = {ContactFilter.ANY: mujoco.mjtObj.mjOBJ_UNKNOWN, ContactFilter.BODIES: mujoco.mjtObj.mjOBJ_BODY,
            ContactFilter.GEOMS: mujoco.mjtObj.mjOBJ_GEOM, ContactFilter.SELF: mujoco.mjtObj.mjOBJ_XBODY}


def add_contact_sensors(spec: mujoco.MjSpec, model: mujoco.MjModel, plan: ContactPlan) -> None:
    """Append one MuJoCo ``<contact>`` sensor per target of ``plan`` to ``spec`` (of ``model``).

    Each reads the net force (``data="force" reduce="netforce"``, 3 columns, world frame) of
    the contacts between the sensed body's own geoms (objtype body) and the target: nothing
    (ANY), a body's own geoms, a geom, or the subtree of the tree's root (xbody, SELF). MuJoCo
    orients it as the force the sensed body exerts on the other side: adapters negate it.
    It is an acceleration-stage sensor, computed from the constraint forces of each step, and
    appended after the model's own sensors, so their sensordata columns do not move.
    """
    spec_bodies = list(spec.bodies)
    if len(spec_bodies) != model.nbody:
        raise ContractViolation(f"model: the spec lists {len(spec_bodies)} bodies, the compiled model {model.nbody}")

    def body_name(b: int) -> str:
        if not spec_bodies[b].name:  # a SELF root may be unnamed; the sensor refers to it by name
            spec_bodies[b].name = f"{_CONTACT_SENSOR_PREFIX}body_{b}"
        return spec_bodies[b].name

    for k, target in enumerate(plan.targets):
        if target.filter is ContactFilter.GEOMS:
            refname = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, target.other)
        elif target.filter is ContactFilter.ANY:
            refname = ""
        else:
            refname = body_name(target.other)
        sensor = spec.add_sensor(type=mujoco.mjtSensor.mjSENS_CONTACT, name=f"{_CONTACT_SENSOR_PREFIX}{k}",
                                 objtype=mujoco.mjtObj.mjOBJ_BODY, objname=body_name(target.body),
                                 reftype=_REFTYPE[target.filter], refname=refname)
        sensor.intprm[0] = 1 << int(mujoco.mjtConDataField.mjCONDATA_FORCE)
        sensor.intprm[1] = 3  # reduce="netforce"
        sensor.intprm[2] = 1  # num: one slot holds the net force
        sensor.dim = 3


def contact_sensor_columns(model: mujoco.MjModel, plan: ContactPlan) -> list[int]:
    """First sensordata column of each target's sensor in the compiled ``model``."""
    cols = []
    for k in range(len(plan.targets)):
        s = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, f"{_CONTACT_SENSOR_PREFIX}{k}")
        if s < 0 or int(model.sensor_dim[s]) != 3:
            raise ContractViolation(f"model: contact sensor {k} did not compile as a 3-wide net force")
        cols.append(int(model.sensor_adr[s]))
    return cols


# ---- height scan (contract 1.5) ----------------------------------------------------------
def resolve_height_scans(requests: object, model: mujoco.MjModel, adapter: str, declared: bool) -> HeightScanPlan:
    """Validate ``height_scans`` against ``model``; an adapter that does not declare
    ``Feature.HEIGHT_SCAN`` passes ``declared=False`` and any request is refused (fail closed).

    Raises ContractViolation naming the scan and argument before anything is built.
    """
    specs = check_height_requests(requests)
    if specs and not declared:
        raise ContractViolation(
            f"height_scans: the {adapter} adapter does not declare Feature.HEIGHT_SCAN "
            f"('{Feature.HEIGHT_SCAN.value}'), so it cannot publish {[s.name for s in specs]}; build the scan on a "
            "backend that declares it (capabilities.features)")
    bodies = {_name(model, mujoco.mjtObj.mjOBJ_BODY, b): b for b in range(model.nbody)}
    geoms = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g): g for g in range(model.ngeom)}
    geoms.pop(None, None)
    static = [g for g in range(model.ngeom) if int(model.body_weldid[model.geom_bodyid[g]]) == 0]
    body_ids, geom_ids = [], []
    for spec in specs:
        where = f"height_scans[{spec.name!r}]"
        body = _lookup(bodies, spec.body, f"{where}.body", "body")
        if body == 0:
            raise ContractViolation(f"{where}.body: the world body does not move; attach the scan to a body of the "
                                    "robot (e.g. its base)")
        if spec.geoms:
            ids = tuple(_lookup(geoms, name, f"{where}.geoms", "geom") for name in spec.geoms)
            moving = sorted(spec.geoms[k] for k, g in enumerate(ids) if g not in static)
            if moving:
                raise ContractViolation(f"{where}.geoms: {moving} belong to bodies that move; the rays see the static "
                                        "terrain only (geoms of bodies welded to the world)")
        else:
            ids = tuple(g for g in static if int(model.geom_group[g]) in spec.geom_groups)
            if not ids:
                raise ContractViolation(f"{where}.geom_groups: no static geom (of a body welded to the world) is in "
                                        f"groups {list(spec.geom_groups)}; the rays would see nothing")
        meshes = sorted(_name(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in ids
                        if int(model.geom_type[g]) in _RAY_UNSUPPORTED)
        if meshes:
            raise ContractViolation(f"{where}: geoms {meshes} are meshes, SDFs or flex; height scans see planes, "
                                    "primitives and heightfields")
        body_ids.append(body)
        geom_ids.append(ids)
    return HeightScanPlan(specs=specs, body_ids=tuple(body_ids), geom_ids=tuple(geom_ids))


_RAY_UNSUPPORTED = {int(mujoco.mjtGeom.mjGEOM_MESH), int(mujoco.mjtGeom.mjGEOM_SDF)}


def ray_scene(model: mujoco.MjModel, geom_ids: tuple[int, ...]) -> mujoco.MjModel:
    """A model holding only ``geom_ids`` of ``model`` (static geoms), each at its world pose, as
    a visible geom of the world body (heightfields with their data): what a height scan's rays
    see, and nothing else, so the engine's ray functions need no per-geom filter. Static geoms
    do not move, so their pose at the model's reference configuration is their pose for ever."""
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    spec = mujoco.MjSpec()
    for g in geom_ids:
        kind = int(model.geom_type[g])
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, data.geom_xmat[g])
        geom = spec.worldbody.add_geom(type=mujoco.mjtGeom(kind), size=[float(v) for v in model.geom_size[g]],
                                       pos=[float(v) for v in data.geom_xpos[g]], quat=[float(v) for v in quat], rgba=[1, 1, 1, 1],
                                       contype=0, conaffinity=0)
        if kind == int(mujoco.mjtGeom.mjGEOM_HFIELD):
            h = int(model.geom_dataid[g])
            nrow, ncol, adr = int(model.hfield_nrow[h]), int(model.hfield_ncol[h]), int(model.hfield_adr[h])
            name = f"hfield_{g}"
            spec.add_hfield(name=name, nrow=nrow, ncol=ncol, size=[float(v) for v in model.hfield_size[h]],
                            userdata=[float(v) for v in model.hfield_data[adr:adr + nrow * ncol]])
            geom.hfieldname = name
    return compile_spec(spec)
