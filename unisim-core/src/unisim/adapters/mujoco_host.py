"""MuJoCo C adapter: HOST_BRIDGE data plane, physics on CPU threads.

Physics runs in ``mujoco.rollout`` over a persistent thread pool: no Python loop over envs.
rollout returns states but not the derived quantities of the final state (its sensordata
row k describes the state *before* step k), so every step ends with a second, cheap
rollout of one step on a "publication model": the same model with all force-producing
stages disabled and one framepos/framequat/framelinvel/frameangvel sensor per body
appended. Its sensordata row 0 is exactly ``mj_forward`` of the new state restricted to
position/velocity-stage quantities -- body poses, body origin velocities (mjOBJ_XBODY) and
the model's own sensors -- and its integrated state is discarded. ``set_state`` runs the
same publication rollout on the written rows only, so those rows are authoritative without
a physics step (IMMEDIATE publication).

Public tensors are slices of one packed float32 buffer per env row
``[qpos | qvel | sensordata | body pos | body quat | body lin vel | body ang vel]``: on a
cpu device the torch views share the NumPy buffer (zero copies); on cuda the adapter does
one host->device copy of the packed buffer per step (pinned memory).

Acceleration-stage sensors (accelerometer, force, torque, touch...) would need a full
``mj_forward`` with constraints, ~10x the cost of the publication pass: they are refused.

Contact sensing (contract 1.3) is the exception that costs nothing extra: each requested
(body, filter) pair becomes a MuJoCo ``<contact>`` net-force sensor appended to the physics
model (not to the publication model), so ``mujoco.rollout`` computes it inside every physics
step from that step's constraint forces; the adapter keeps the last substep's row, sums the
targets of each sensed body and packs the result with the other views (``force_w``, after the
body views). Rows written by ``set_state`` are cleared (``ContactAfterReset.CLEARED``).

Height scans (contract 1.5) are cast with MuJoCo's ``mj_ray`` on a "ray scene": a model of the
requested static geoms only (``unisim.mjcf.ray_scene``), so no filter is needed and the robot
is never hit. After every publication pass (step and written rows alike) the rays' origins
come from the pass's body poses, one ``mj_ray`` per ray and env, and distance and hit height join
the packed row: the same one transfer. ``mj_ray`` tests every geom of the scene, so a step's
scan costs num_envs x rays x terrain geoms, which is why a scan at scale runs on mjwarp.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch
from mujoco import rollout

from unisim.capabilities import Capabilities, DataPlane, Feature, ResetPublication
from unisim.contacts import ContactAfterReset, ContactFilter, ContactSensorSpec, in_contact_from_force
from unisim.contract import SimBackend
from unisim.devices import resolve_device
from unisim.errors import ContractViolation
from unisim.height_scan import HeightScanSpec, yaw_frame_origins
from unisim.mjcf import (
    add_contact_sensors,
    body_mass_minimums,
    build_inventory,
    check_sensor_kinds,
    compile_spec,
    contact_sensor_columns,
    load_spec,
    ray_scene,
    resolve_contact_sensors,
    resolve_height_scans,
)
from unisim.views import BackendViews

SENSOR_KINDS = frozenset({
    "jointpos", "jointvel", "tendonpos", "tendonvel", "actuatorpos", "actuatorvel", "ballquat",
    "ballangvel", "framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis", "framelinvel",
    "frameangvel", "gyro", "velocimeter", "magnetometer", "clock",
})
MODEL_FIELDS = frozenset({"geom_friction", "body_mass", "body_ipos"})
# Negative friction is not physics; body masses have per-body floors (mjcf.body_mass_minimums:
# a massive body stays above MIN_BODY_MASS, a massless one may hold 0). A centre of mass
# (body_ipos, body frame) may sit anywhere.
FRICTION_MINIMUMS = (0.0, 0.0, 0.0)
CONTACT_FILTERS = frozenset(ContactFilter)

_STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS
_BODY_FRAME_SENSORS = (  # order of the appended per-body blocks in the publication model
    mujoco.mjtSensor.mjSENS_FRAMEPOS, mujoco.mjtSensor.mjSENS_FRAMEQUAT,
    mujoco.mjtSensor.mjSENS_FRAMELINVEL, mujoco.mjtSensor.mjSENS_FRAMEANGVEL,
)
# Everything that only produces forces: the publication pass needs kinematics and
# position/velocity-stage sensors, nothing that costs collision or a constraint solve.
_PUBLICATION_DISABLED = (
    "mjDSBL_CONTACT", "mjDSBL_CONSTRAINT", "mjDSBL_ACTUATION", "mjDSBL_GRAVITY", "mjDSBL_SPRING",
    "mjDSBL_DAMPER", "mjDSBL_LIMIT", "mjDSBL_EQUALITY", "mjDSBL_FRICTIONLOSS", "mjDSBL_WARMSTART",
    "mjDSBL_MIDPHASE", "mjDSBL_CLAMPCTRL", "mjDSBL_ISLAND",
)


def _publication_model(spec: mujoco.MjSpec, nbody: int, body_names: list[str]) -> mujoco.MjModel:
    for kind in _BODY_FRAME_SENSORS:
        for name in body_names:
            spec.add_sensor(type=kind, objtype=mujoco.mjtObj.mjOBJ_XBODY, objname=name)
    model = compile_spec(spec)
    flags = 0
    for name in _PUBLICATION_DISABLED:
        flags |= int(getattr(mujoco.mjtDisableBit, name))
    model.opt.disableflags = flags
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    return model


def _drop_compiled_shortcuts(model: mujoco.MjModel, name: str) -> None:
    """Let a written mass or centre of mass take effect. The compiler takes shortcuts that hold
    only for the compiled values: a "simple" body's share of the mass matrix is a constant of
    the compiled model, and where a centre of mass sits at its body's origin kinematics copies
    the body frame instead of computing the inertial frame (and copies the inertial frame for a
    geom or site placed at the centre of mass). After a write, a simple body would keep its
    compiled mass, a centre of mass would stay at the origin, and such a geom would follow it.
    The generic paths compute all of it from the current fields; the rotations stay shared
    (``body_iquat`` is not written)."""
    model.body_simple[:] = 0
    model.dof_simplenum[:] = 0
    if name == "body_ipos":
        model.body_sameframe[model.body_sameframe == mujoco.mjtSameFrame.mjSAMEFRAME_BODY] = \
            mujoco.mjtSameFrame.mjSAMEFRAME_BODYROT
        for frames in (model.geom_sameframe, model.site_sameframe):
            frames[frames == mujoco.mjtSameFrame.mjSAMEFRAME_INERTIA] = mujoco.mjtSameFrame.mjSAMEFRAME_INERTIAROT


class MujocoHostBackend(SimBackend):
    """``num_envs`` MuJoCo envs stepped by mujoco.rollout on ``nthread`` CPU threads."""

    def __init__(self, model: str | Path, num_envs: int, device: torch.device, nthread: int | None = None,
                 validate: bool = True, contact_sensors: tuple[ContactSensorSpec, ...] = (),
                 height_scans: tuple[HeightScanSpec, ...] = ()) -> None:
        super().__init__(num_envs, validate)
        spec = load_spec(model)
        user_model = compile_spec(spec.copy())  # the model as written: inventory and sensor layout
        check_sensor_kinds(user_model, SENSOR_KINDS, "mujoco")
        self._inventory = build_inventory(user_model)
        plan = resolve_contact_sensors(contact_sensors, user_model, CONTACT_FILTERS, "mujoco")
        scans = resolve_height_scans(height_scans, user_model, "mujoco", declared=True)
        if plan.targets:  # physics model = the user's + contact sensors after its own sensors
            physics_spec = spec.copy()
            add_contact_sensors(physics_spec, user_model, plan)
            self._model = compile_spec(physics_spec)
        else:
            self._model = user_model
        body_names = [b.name for b in self._inventory.bodies]
        self._pub_model = _publication_model(spec, self._model.nbody, body_names)
        self._capabilities = Capabilities(
            data_plane=DataPlane.HOST_BRIDGE, device=device,
            selected_reset_publication=ResetPublication.IMMEDIATE,
            features=frozenset({Feature.BODY_VIEWS, Feature.MODEL_FIELD_WRITES, Feature.DETERMINISTIC,
                                Feature.CONTACT_SENSORS, Feature.HEIGHT_SCAN}
                               | ({Feature.SENSOR_VIEWS} if user_model.nsensor else set())),
            sensor_kinds=SENSOR_KINDS if user_model.nsensor else frozenset(),
            model_fields=MODEL_FIELDS, model_field_minimums={"geom_friction": FRICTION_MINIMUMS, "body_mass": body_mass_minimums(user_model)},
            contact_filters=CONTACT_FILTERS, contact_after_reset=ContactAfterReset.CLEARED)

        if nthread is None:
            nthread = len(os.sched_getaffinity(0))
        if not isinstance(nthread, int) or isinstance(nthread, bool) or nthread < 1:
            raise ContractViolation(f"nthread: expected an int >= 1, got {nthread!r}")
        self._nthread = nthread
        self._pool = rollout.Rollout(nthread=nthread)
        self._datas = [mujoco.MjData(self._model) for _ in range(nthread)]
        self._pub_datas = [mujoco.MjData(self._pub_model) for _ in range(nthread)]
        # rollout with skip_checks takes one model per env; distinct copies only after a field write.
        self._physics_models = [self._model] * num_envs
        self._pub_models = [self._pub_model] * num_envs
        self._per_env_models = False
        self._per_env_publication = False

        m = self._model
        nq, nv, nbody, nsd = m.nq, m.nv, m.nbody, user_model.nsensordata
        self._nstate = mujoco.mj_stateSize(m, _STATE_SPEC)
        self._qpos_cols = slice(1, 1 + nq)  # FULLPHYSICS = time | qpos | qvel | act | ...
        self._qvel_cols = slice(1 + nq, 1 + nq + nv)
        data = mujoco.MjData(m)
        initial = np.empty(self._nstate)
        mujoco.mj_getState(m, data, initial, _STATE_SPEC)
        self._state = np.tile(initial, (num_envs, 1))
        self._step_out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._ctrl_buf: dict[int, np.ndarray] = {}
        npub = self._pub_model.nsensordata
        self._pub_state_out = np.empty((num_envs, 1, self._nstate))
        self._pub_sensor_out = np.empty((num_envs, 1, npub))

        # Contact targets -> rows: the last substep's sensor columns of each target, and a
        # (targets, rows) matrix of -1 that sums them per sensed body, turned to "force ON the
        # body" (MuJoCo orients the sensor as the force the body exerts).
        ncontact = plan.rows
        cols = contact_sensor_columns(self._model, plan) if plan.targets else []
        self._contact_cols = np.array([c + i for c in cols for i in range(3)], dtype=np.int64)
        self._contact_sum = np.zeros((len(cols), ncontact))
        for k, target in enumerate(plan.targets):
            self._contact_sum[k, target.row] = -1.0

        # Height scans: per spec a ray scene, its pattern, and its columns of the packed row
        # (distance of every ray, then hit z).
        self._scans = [(ray_scene(user_model, ids), spec.pattern(), body, spec.max_distance)
                       for spec, body, ids in zip(scans.specs, scans.body_ids, scans.geom_ids, strict=True)]
        self._scan_datas = [mujoco.MjData(scene) for scene, *_ in self._scans]
        for (scene, *_), data in zip(self._scans, self._scan_datas, strict=True):
            mujoco.mj_kinematics(scene, data)
        self._scan_geomid = np.zeros(1, dtype=np.int32)
        self._body_pos_cols = nsd  # where the publication pass's per-body frame sensors start
        self._body_quat_cols = nsd + 3 * nbody
        nrays = sum(spec.num_rays for spec in scans.specs)

        # Packed host row: qpos | qvel | sensordata (model's + appended body frames) | contact forces |
        # height scans.
        width = nq + nv + npub + 3 * ncontact + 2 * nrays
        pin = device.type == "cuda"
        self._host = torch.zeros((num_envs, width), dtype=torch.float32, pin_memory=pin)
        self._host_np = self._host.numpy()
        self._public = self._host if device.type == "cpu" else torch.zeros(
            (num_envs, width), dtype=torch.float32, device=device)
        p, off = self._public, nq + nv + nsd
        body, start = [], off
        for w in (3, 4, 3, 3):
            body.append(p[:, start:start + nbody * w].unflatten(1, (nbody, w)))
            start += nbody * w
        self._contact_start = nq + nv + npub
        self._contact_force = p[:, self._contact_start:self._contact_start + 3 * ncontact].unflatten(1, (ncontact, 3))
        self._scan_start = self._contact_start + 3 * ncontact
        distance, hit_z, start = [], [], self._scan_start
        for spec in scans.specs:
            distance.append(p[:, start:start + spec.num_rays])
            hit_z.append(p[:, start + spec.num_rays:start + 2 * spec.num_rays])
            start += 2 * spec.num_rays
        self._scan_distance = distance
        self._scan_hit = [torch.zeros((num_envs, spec.num_rays), dtype=torch.bool, device=device)
                          for spec in scans.specs]
        self._in_contact = torch.zeros((num_envs, ncontact), dtype=torch.bool, device=device)
        self._contact_thresholds = torch.tensor(plan.thresholds, dtype=torch.float32, device=device)
        self._views = BackendViews(
            qpos=p[:, :nq], qvel=p[:, nq:nq + nv], body_pos_w=body[0], body_quat_w=body[1],
            body_lin_vel_w=body[2], body_ang_vel_w=body[3], sensordata=p[:, nq + nv:nq + nv + nsd],
            contacts=plan.views(self._contact_force, self._in_contact),
            height_scans=scans.views(distance, self._scan_hit, hit_z))
        self._stats = {"physics_steps": 0, "publication_passes": 0, "set_state_calls": 0, "unstable_resets": 0}
        self._restarted = np.zeros(num_envs, dtype=bool)  # worlds MuJoCo restarted at least once
        # Worlds written with a value MuJoCo takes as unstable (NaN, or past mjMAXVAL): it restarts them
        # on their next substep, from time 0, where the clock check below cannot see it.
        self._written_unstable = np.zeros(num_envs, dtype=bool)
        self._publish(np.arange(num_envs))  # contacts start cleared

    def diagnostics(self) -> dict[str, Any]:
        return {"nthread": self._nthread, "per_env_models": self._per_env_models,
                **self._stats, "altered_worlds": int(np.count_nonzero(self._restarted))}

    # ---- lifecycle --------------------------------------------------------------------
    def _step(self, ctrl: torch.Tensor, substeps: int) -> None:
        if substeps not in self._step_out:
            self._step_out[substeps] = (np.empty((self.num_envs, substeps, self._nstate)),
                                        np.empty((self.num_envs, substeps, self._model.nsensordata)))
            self._ctrl_buf[substeps] = np.empty((self.num_envs, substeps, self._model.nu))
        states, sensors = self._step_out[substeps]
        ctrl_buf = self._ctrl_buf[substeps]
        dt = self._model.opt.timestep
        clock = self._state[:, 0] + substeps * dt  # each world's time after these substeps
        # One device->host transfer; the action is held for every substep.
        ctrl_buf[:] = ctrl.detach().to("cpu").numpy()[:, None, :]
        self._pool.rollout(self._physics_models, self._datas, self._state, ctrl_buf, nstep=substeps,
                           state=states, sensordata=sensors, skip_checks=True)
        self._state[:] = states[:, -1]
        self._stats["physics_steps"] += substeps
        # MuJoCo resets a world whose state turned unstable (NaN, or a value past 1e10 in qpos,
        # qvel or qacc) to the model's initial state inside the rollout and steps on; only its
        # clock tells, reading less than the steps taken. Counted (world x env step), so a run
        # can tell that its physics restarted worlds under it.
        restarted = (self._state[:, 0] < clock - 0.5 * dt) | self._written_unstable
        self._written_unstable[:] = False
        self._stats["unstable_resets"] += int(np.count_nonzero(restarted))
        self._restarted |= restarted
        self._publish(None, sensors[:, -1])

    def _set_state(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        idx = rows.detach().to("cpu").numpy()
        self._state[idx] = 0.0  # time, act and history restart with the episode
        self._state[idx, self._qpos_cols] = qpos.detach().to("cpu", torch.float64).numpy()
        self._state[idx, self._qvel_cols] = qvel.detach().to("cpu", torch.float64).numpy()
        written = self._state[idx, self._qpos_cols.start:self._qvel_cols.stop]  # qpos | qvel
        # MuJoCo's own test (mju_isBad): NaN, or a magnitude past mjMAXVAL. Written as "not
        # within" so that NaN, which compares False with everything, counts (validate=False).
        self._written_unstable[idx] = ~(np.abs(written) <= mujoco.mjMAXVAL).all(axis=1)
        self._stats["set_state_calls"] += 1
        self._publish(idx)

    def _publish(self, idx: np.ndarray | None, contact_sensordata: np.ndarray | None = None) -> None:
        """Recompute derived quantities of all rows (idx None, after a step whose last substep's
        sensordata is ``contact_sensordata``) or of ``idx`` (written rows), then transfer."""
        state = self._state if idx is None else self._state[idx]
        n = state.shape[0]
        pub_models = self._pub_models if idx is None else [self._pub_models[i] for i in idx]
        self._pool.rollout(pub_models, self._pub_datas, state, None, nstep=1,
                           state=self._pub_state_out[:n], sensordata=self._pub_sensor_out[:n],
                           skip_checks=True)
        self._stats["publication_passes"] += 1
        m, c0 = self._model, self._contact_start
        if idx is None:
            host = self._host_np
            host[:, :m.nq] = state[:, self._qpos_cols]
            host[:, m.nq:m.nq + m.nv] = state[:, self._qvel_cols]
            host[:, m.nq + m.nv:c0] = self._pub_sensor_out[:, 0]
            if self._contact_cols.size:  # forces of the last substep's constraint solve
                raw = contact_sensordata[:, self._contact_cols].reshape(self.num_envs, -1, 3)
                host[:, c0:self._scan_start] = np.einsum("nkd,kr->nrd", raw, self._contact_sum).reshape(
                    self.num_envs, -1)
            if self._scans:
                host[:, self._scan_start:] = self._cast(self._pub_sensor_out[:, 0])
            if self._public is not self._host:
                # Async from pinned memory: the next step's ctrl.to("cpu") is a blocking copy
                # on the same stream, so this transfer has finished before the host buffer is
                # rewritten by the next physics step.
                self._public.copy_(self._host, non_blocking=True)
            self._publish_in_contact()
            if self._scans:
                self._publish_hits()
            return
        # Written rows: no contact solve has run for the new state, so contacts are cleared; their
        # height scans are cast at the new state.
        rows_np = np.concatenate([state[:, self._qpos_cols], state[:, self._qvel_cols], self._pub_sensor_out[:n, 0],
                                  np.zeros((n, self._scan_start - c0)), self._cast(self._pub_sensor_out[:n, 0])],
                                 axis=1)
        self._host_np[idx] = rows_np
        if self._public is not self._host:
            rows_t = torch.from_numpy(idx).to(self.device)
            self._public.index_copy_(0, rows_t, torch.from_numpy(rows_np.astype(np.float32)).to(self.device))
        self._publish_in_contact()
        if self._scans:
            self._publish_hits()

    def _cast(self, pub_sensordata: np.ndarray) -> np.ndarray:
        """(n, 2 * rays) float64: every scan's distances then hit heights, for the rows whose
        publication-pass sensordata is ``pub_sensordata`` (n, npub)."""
        n, blocks = pub_sensordata.shape[0], []
        down, geomid = np.array([0.0, 0.0, -1.0]), self._scan_geomid
        for (scene, pattern, body, max_distance), data in zip(self._scans, self._scan_datas, strict=True):
            pos = pub_sensordata[:, self._body_pos_cols + 3 * body:self._body_pos_cols + 3 * body + 3]
            quat = pub_sensordata[:, self._body_quat_cols + 4 * body:self._body_quat_cols + 4 * body + 4]
            origins = yaw_frame_origins(torch.from_numpy(pos), torch.from_numpy(quat), pattern).numpy()
            distance = np.full(origins.shape[:2], max_distance)
            for i in range(n):
                for k in range(origins.shape[1]):
                    d = mujoco.mj_ray(scene, data, origins[i, k], down, None, 1, -1, geomid)
                    if 0.0 <= d < max_distance:
                        distance[i, k] = d
            blocks += [distance, origins[:, :, 2] - distance]
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))

    def _publish_hits(self) -> None:
        for distance, hit, (*_, max_distance) in zip(self._scan_distance, self._scan_hit, self._scans, strict=True):
            torch.lt(distance, max_distance, out=hit)

    def _publish_in_contact(self) -> None:
        if self._in_contact.shape[1]:
            in_contact_from_force(self._contact_force, self._contact_thresholds, self._in_contact)

    # ---- model fields -----------------------------------------------------------------
    def _model_field(self, name: str) -> torch.Tensor:
        if self._per_env_models:
            values = np.stack([getattr(m, name) for m in self._physics_models])
        else:
            values = np.repeat(getattr(self._model, name)[None], self.num_envs, axis=0)
        return torch.from_numpy(values.astype(np.float32)).to(self.device)

    def _set_model_field(self, name: str, rows: torch.Tensor, values: torch.Tensor) -> None:
        if not self._per_env_models:  # copy on first write: rollout then takes one model per env
            self._physics_models = [copy.copy(self._model) for _ in range(self.num_envs)]
            self._per_env_models = True
        # Friction and mass do not change kinematics, so one publication model serves every row
        # until a centre of mass moves: the publication pass computes the inertial frames (a
        # sensor on a body's centre of mass reads them).
        if name == "body_ipos" and not self._per_env_publication:
            self._pub_models = [copy.copy(self._pub_model) for _ in range(self.num_envs)]
            self._per_env_publication = True
        vals = values.detach().to("cpu", torch.float64).numpy()
        for k, row in enumerate(rows.detach().to("cpu").tolist()):  # event path, not per step
            written = (self._physics_models[row], self._pub_models[row]) if name == "body_ipos" \
                else (self._physics_models[row],)
            for model in written:
                getattr(model, name)[:] = vals[k]
                if name != "geom_friction":
                    _drop_compiled_shortcuts(model, name)

    def _close(self) -> None:
        self._pool.close()


def make(model: str | Path, num_envs: int, device: str | torch.device | None = None,
         contact_sensors: tuple[ContactSensorSpec, ...] = (), height_scans: tuple[HeightScanSpec, ...] = (),
         nthread: int | None = None, validate: bool = True) -> MujocoHostBackend:
    # Physics is on the CPU regardless; ``device`` is where the published tensors live.
    # A HOST_BRIDGE backend defaults to cpu so a bare call never touches a GPU.
    resolved = torch.device("cpu") if device is None else resolve_device(device)
    return MujocoHostBackend(model, num_envs, resolved, nthread=nthread, validate=validate,
                             contact_sensors=contact_sensors, height_scans=height_scans)
