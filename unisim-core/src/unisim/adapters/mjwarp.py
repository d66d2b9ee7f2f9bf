"""MuJoCo Warp adapter: DEVICE data plane, every env a warp world.

Trade-offs, decided here:
- Views are zero-copy torch tensors over the warp arrays (``wp.to_torch``), made once; warp
  kernels write into the same memory, so the views are always current and ``step`` copies
  nothing but ``ctrl`` into ``d.ctrl``.
- ``step`` replays a captured graph of [substeps x mjw.step, publish] (one graph per
  distinct ``substeps``). ``mjw.step`` leaves xpos/cvel/sensordata describing the state
  BEFORE the last integration (mj_step computes them before it integrates), so the graph ends with the publish pass
  (kinematics, com_pos, com_vel, sensor_pos, sensor_vel, body-origin velocities): views then
  describe the qpos/qvel they sit next to. That pass is a few percent of one substep.
- ``set_state`` writes rows with torch ``index_copy_`` on the device (no host sync), zeroes
  time/act/qacc_warmstart and the overflow bits of those rows, then replays the publish
  graph. The publish kernels recompute EVERY world (mujoco_warp takes no world mask), which
  is exact for untouched rows because they are pure functions of qpos/qvel: publication is
  IMMEDIATE and no physics step runs. ``set_state_where`` (contract 1.1) does the same with
  ``torch.where``/``masked_fill_`` over all rows, so it needs no row count and no host sync
  (declared as DEVICE_MASKED_RESET).
- Torch and warp share one stream order: graphs are launched on the stream torch is using
  at the time of the call (``wp.stream_from_torch``), so a caller's torch work before and
  after ``step`` is ordered without a sync.
- On CUDA the graphs are CUDA graphs (feature GRAPH_CAPTURE). On the CPU warp also records
  and replays launch lists; we use that when it works and fall back to eager launches when
  capture raises (on either device), with a ``RuntimeWarning`` that says why, and
  ``diagnostics()['step_mode']`` says which one runs.
- Contact sensing (contract 1.3): the step graph ends with one pass over the last substep's
  live contacts (``warp_contacts``) that sums each requested body's forces into
  ``force_w``/``in_contact``: on the device, inside the captured graph, once per env step, and
  nothing is added to the model. ``set_state``/``set_state_where`` clear the written rows with
  torch (``ContactAfterReset.CLEARED``), no sync, no physics.
- Contact/constraint buffers are sized from the model (``default_buffer_sizes``: twice the
  contacts/rows of its resting poses, at least mujoco_warp's defaults) times num_envs unless
  ``nconmax``/``njmax`` are given; overflow is sticky per world in ``d.overflow`` and is
  read only by ``diagnostics()``, never per step. A reset clears a world's bits for its new
  episode after OR-ing them into a history (one op on the device per reset call), so
  ``diagnostics()`` also says how many worlds overflowed at any time since the backend was
  built: an overflow drops contacts or constraint rows, and a run should be able to tell.
- Height scans (contract 1.5): the publish pass ends with ``warp_height_scan``'s launches
  (origins from the just-published body poses, ``mjw.rays`` on a ray scene of the requested
  static geoms, results into the arrays the views wrap). The publish pass is in the step graph
  and is what ``set_state``/``set_state_where`` replay, so scans are cast after every step and
  every write, on the device, with no host sync.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from unisim.adapters.warp_contacts import contact_buffers, contact_tables, publish_contacts
from unisim.adapters.warp_height_scan import publish_scans, scan_buffers, scan_tables
from unisim.adapters.warp_support import (
    body_origin_velocity,
    default_buffer_sizes,
    torch_view,
    warp_device,
)
from unisim.capabilities import Capabilities, DataPlane, Feature, ResetPublication
from unisim.contacts import ContactAfterReset, ContactFilter, ContactPlan, ContactSensorSpec
from unisim.contract import Mask, Rows, SimBackend
from unisim.devices import resolve_device
from unisim.errors import ContractViolation
from unisim.height_scan import HeightScanPlan, HeightScanSpec
from unisim.mjcf import (
    body_mass_minimums,
    build_inventory,
    check_sensor_kinds,
    compile_spec,
    load_spec,
    resolve_contact_sensors,
    resolve_height_scans,
    subtree_membership,
)
from unisim.views import BackendViews

# Kinds whose values are exact after the publish pass (position and velocity stages, no
# constraint, tendon, actuator or acceleration inputs). Pinned against MuJoCo C in
# tests/test_mjwarp_adapter.py.
SENSOR_KINDS = frozenset({
    "gyro", "velocimeter", "jointpos", "jointvel", "ballquat", "ballangvel",
    "framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis", "framelinvel", "frameangvel",
    "subtreecom", "subtreelinvel", "subtreeangmom", "clock",
})

# Per-env model fields for domain randomization. mujoco_warp reads batched model fields as
# field[world % batch], so put_model gives them a num_envs batch and writes go straight into
# that memory; like the mujoco adapter, derived constants are not recomputed. ``body_ipos`` (the
# centre of mass in the body frame) has no floor: any offset is physics.
MODEL_FIELDS = frozenset({"geom_friction", "body_mass", "body_ipos"})
# Sliding friction below ~1e-3 turns that world's state into NaN on its first contact step in
# mujoco_warp (float32; seen at 1e-4 on warp's CPU device) while MuJoCo C copes. Declared, so a
# validated write refuses it and a caller that skips validation can prove its range once,
# instead of this adapter reading a minimum to the host on every write.
# Body masses have per-body floors as on mujoco (mjcf.body_mass_minimums).
FRICTION_MINIMUMS = (1e-3, 0.0, 0.0)

OPTIONS = ("nconmax", "njmax", "graph", "validate")
CONTACT_FILTERS = frozenset(ContactFilter)


_WARNED_CPU = False


def warn_cpu_device() -> None:
    """Say once per process that mjwarp runs on Warp's CPU device, where the mujoco backend
    (MuJoCo C, threaded) is the faster choice: Warp's CPU device runs each kernel serially."""
    global _WARNED_CPU
    if _WARNED_CPU:
        return
    _WARNED_CPU = True
    print("unisim: warning: the mjwarp backend is running on Warp's CPU device (no CUDA device here, or device "
          "cpu); the mujoco backend is the faster CPU choice: --backend mujoco",
          file=sys.stderr, flush=True)


def make(model: str | Path, num_envs: int, device: str | torch.device | None = None,
         contact_sensors: tuple[ContactSensorSpec, ...] = (), height_scans: tuple[HeightScanSpec, ...] = (),
         **options) -> MjWarpBackend:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ContractViolation(f"options: unknown mjwarp option(s) {unknown}; valid: {list(OPTIONS)}")
    for key in ("nconmax", "njmax"):
        value = options.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ContractViolation(f"{key}: expected an int >= 1 or None, got {value!r}")
    graph = options.get("graph", True)
    if not isinstance(graph, bool):
        raise ContractViolation(f"graph: expected a bool, got {graph!r}")
    mjmodel = compile_spec(load_spec(model))
    check_sensor_kinds(mjmodel, SENSOR_KINDS, "mjwarp")
    plan = resolve_contact_sensors(contact_sensors, mjmodel, CONTACT_FILTERS, "mjwarp")
    scans = resolve_height_scans(height_scans, mjmodel, "mjwarp", declared=True)
    resolved = resolve_device(device)
    if resolved.type == "cpu":
        warn_cpu_device()
    return MjWarpBackend(mjmodel, num_envs, resolved, nconmax=options.get("nconmax"),
                         njmax=options.get("njmax"), graph=graph, validate=options.get("validate", True),
                         contact_plan=plan, scan_plan=scans)


class MjWarpBackend(SimBackend):
    """``num_envs`` MuJoCo Warp worlds of one model; see the module docstring."""

    def __init__(self, mjmodel: mujoco.MjModel, num_envs: int, device: torch.device, *,
                 nconmax: int | None = None, njmax: int | None = None, graph: bool = True,
                 validate: bool = True, contact_plan: ContactPlan | None = None,
                 scan_plan: HeightScanPlan | None = None) -> None:
        super().__init__(num_envs, validate)
        plan = contact_plan if contact_plan is not None else ContactPlan((), (), (), (), ())
        scans = scan_plan if scan_plan is not None else HeightScanPlan((), (), ())
        self._inventory = build_inventory(mjmodel)
        self._has_cameras = mjmodel.ncam > 0
        self._wp_device = warp_device(device)
        self._cuda = device.type == "cuda"
        default_nconmax, default_njmax = default_buffer_sizes(mjmodel)
        nconmax = default_nconmax if nconmax is None else nconmax
        njmax = default_njmax if njmax is None else njmax
        wp.init()
        with wp.ScopedDevice(self._wp_device):
            # body_subtreemass too: the subtree sensors divide by it, and a mass write updates it.
            self._m = mjw.put_model(mjmodel, batch_sizes=dict.fromkeys(MODEL_FIELDS | {"body_subtreemass"}, num_envs))
            self._d = mjw.make_data(mjmodel, nworld=num_envs, nconmax=nconmax, njmax=njmax)
            self._rootid = wp.array(mjmodel.body_rootid.astype("int32"), dtype=wp.int32)
            nbody = mjmodel.nbody
            self._lin_vel = wp.zeros((num_envs, nbody), dtype=wp.vec3)
            self._ang_vel = wp.zeros((num_envs, nbody), dtype=wp.vec3)
            self._contacts = contact_tables(mjmodel, plan, num_envs, int(self._d.naconmax))
            self._scans = scan_tables(mjmodel, scans, num_envs)
            self._warm_up(mjmodel, nconmax, njmax)
            mjw.forward(self._m, self._d)  # every view authoritative from construction on
            self._publish()
        wp.synchronize_device(self._wp_device)  # construction ran on warp's stream, not torch's
        self._nconmax_per_world = nconmax
        d = self._d
        self._qpos = wp.to_torch(d.qpos)
        self._qvel = wp.to_torch(d.qvel)
        self._ctrl = torch_view(d.ctrl, num_envs, mjmodel.nu)
        self._act = torch_view(d.act, num_envs, mjmodel.na)
        self._time = wp.to_torch(d.time)
        self._warmstart = wp.to_torch(d.qacc_warmstart)
        self._overflow = wp.to_torch(d.overflow)
        self._overflow_history = torch.zeros_like(self._overflow)  # bits of every episode so far
        self._fields = {name: wp.to_torch(getattr(self._m, name)) for name in MODEL_FIELDS}
        self._subtree_mass = wp.to_torch(self._m.body_subtreemass)
        self._in_subtree = subtree_membership(mjmodel.body_parentid).to(device)
        # Contact views: zero-copy over the kernel's outputs (empty tensors when none was asked).
        contacts = self._contacts
        self._contact_force = (wp.to_torch(contacts["force"]) if contacts else
                               torch.zeros((num_envs, 0, 3), dtype=torch.float32, device=device))
        self._in_contact = (wp.to_torch(contacts["in_contact"]) if contacts else
                            torch.zeros((num_envs, 0), dtype=torch.bool, device=device))
        sensordata = torch_view(d.sensordata, num_envs, mjmodel.nsensordata)
        self._views = BackendViews(
            qpos=self._qpos, qvel=self._qvel,
            body_pos_w=wp.to_torch(d.xpos), body_quat_w=wp.to_torch(d.xquat),
            body_lin_vel_w=wp.to_torch(self._lin_vel), body_ang_vel_w=wp.to_torch(self._ang_vel),
            sensordata=sensordata, contacts=plan.views(self._contact_force, self._in_contact),
            height_scans=scans.views([wp.to_torch(t["distance"]) for t in self._scans],
                                     [wp.to_torch(t["hit"]) for t in self._scans],
                                     [wp.to_torch(t["hit_z"]) for t in self._scans]))
        self._use_graph = graph
        self._eager_reason: str | None = None if graph else "graph=False was requested"
        self._graphs: dict[int, Any] = {}
        self._publish_graph = self._capture(self._publish) if graph else None
        self._use_graph = self._publish_graph is not None
        self._capabilities = self._declare(mjmodel, device)
        self._stream_key: int | None = None
        self._stream = None
        self._physics_steps = 0
        self._env_steps = 0
        self._set_state_calls = 0

    def _declare(self, mjmodel: mujoco.MjModel, device: torch.device) -> Capabilities:
        # Declared after the publish graph was captured, so GRAPH_CAPTURE is only claimed
        # when capture really worked on this device.
        features = {Feature.BODY_VIEWS, Feature.MODEL_FIELD_WRITES, Feature.DEVICE_MASKED_RESET,
                    Feature.CONTACT_SENSORS, Feature.HEIGHT_SCAN}
        if mjmodel.nsensor:
            features.add(Feature.SENSOR_VIEWS)
        if self._cuda and self._use_graph:
            features.add(Feature.GRAPH_CAPTURE)
        if not self._cuda:
            # warp's CPU device runs each kernel serially, so contact order (atomics on CUDA)
            # is fixed and runs repeat bit for bit; on CUDA they do not, so it is not declared.
            features.add(Feature.DETERMINISTIC)
        return Capabilities(
            data_plane=DataPlane.DEVICE, device=device,
            selected_reset_publication=ResetPublication.IMMEDIATE, features=frozenset(features),
            sensor_kinds=SENSOR_KINDS if mjmodel.nsensor else frozenset(), model_fields=MODEL_FIELDS,
            model_field_minimums={"geom_friction": FRICTION_MINIMUMS, "body_mass": body_mass_minimums(mjmodel)},
            contact_filters=CONTACT_FILTERS,
            contact_after_reset=ContactAfterReset.CLEARED)

    # ---- physics ------------------------------------------------------------------
    def _step(self, ctrl: torch.Tensor, substeps: int) -> None:
        self._ctrl.copy_(ctrl)  # torch's stream; the graph below is launched on that stream too
        graph = None
        if self._use_graph:
            if substeps not in self._graphs:
                self._graphs[substeps] = self._capture(lambda: self._substeps(substeps))
            graph = self._graphs[substeps]
        if graph is not None:
            self._launch(graph)
        else:
            with self._scope():
                self._substeps(substeps)
        self._physics_steps += substeps
        self._env_steps += 1

    def _set_state(self, rows: Rows, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        # A source read from the live views (copying env 0's state to others) overlaps the
        # destination, which index_copy_ refuses after the other has been written: copy it first.
        qpos = qpos.clone() if _shares_storage(qpos, self._qpos) else qpos
        qvel = qvel.clone() if _shares_storage(qvel, self._qvel) else qvel
        self._qpos.index_copy_(0, rows, qpos)
        self._qvel.index_copy_(0, rows, qvel)
        self._time.index_fill_(0, rows, 0.0)
        self._act.index_fill_(0, rows, 0.0)
        self._warmstart.index_fill_(0, rows, 0.0)
        self._overflow_history.bitwise_or_(self._overflow)  # all rows: unreset ones only repeat bits
        self._overflow.index_fill_(0, rows, 0)  # a fresh episode starts without overflow history
        self._contact_force.index_fill_(0, rows, 0.0)  # no contact solve has run for the new state
        self._in_contact.index_fill_(0, rows, False)
        self._republish()

    def _set_state_where(self, mask: Mask, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        # Same writes as _set_state, masked: no row count, so nothing here waits for the host.
        rows = mask.unsqueeze(1)
        torch.where(rows, qpos, self._qpos, out=self._qpos)  # in place: one kernel, no temporary
        torch.where(rows, qvel, self._qvel, out=self._qvel)
        self._time.masked_fill_(mask, 0.0)
        self._act.masked_fill_(rows, 0.0)
        self._warmstart.masked_fill_(rows, 0.0)
        self._overflow_history.bitwise_or_(self._overflow)
        self._overflow.masked_fill_(mask, 0)
        self._contact_force.masked_fill_(rows.unsqueeze(2), 0.0)
        self._in_contact.masked_fill_(rows, False)
        self._republish()

    def _republish(self) -> None:
        if self._publish_graph is not None:
            self._launch(self._publish_graph)
        else:
            with self._scope():
                self._publish()
        self._set_state_calls += 1

    def _model_field(self, name: str) -> torch.Tensor:
        return self._fields[name].clone()  # a snapshot: callers edit it and write it back

    def _set_model_field(self, name: str, rows: Rows, values: torch.Tensor) -> None:
        # The graphs read these arrays by pointer, so the write is in place and needs no recapture.
        self._fields[name].index_copy_(0, rows, values)
        if name == "body_mass":  # the one derived constant a sensor reads (subtreecom, subtreelinvel)
            # A masked sum, not a matmul: a caller's TF32 setting would round a matmul's inputs.
            self._subtree_mass.index_copy_(0, rows, (values[:, :, None] * self._in_subtree).sum(1))

    def diagnostics(self) -> dict[str, Any]:
        # The only place overflow and contact counts cross to the host.
        overflow = self._overflow
        history = overflow | self._overflow_history
        overflowed_since_build = int((history != 0).sum().item())
        return {
            "backend_device": str(self.device),
            "step_mode": self._step_mode(),
            "eager_reason": self._eager_reason,
            "graphs_captured_substeps": sorted(k for k, g in self._graphs.items() if g is not None),
            "physics_steps": self._physics_steps,
            "env_steps": self._env_steps,
            "set_state_calls": self._set_state_calls,
            "naconmax": int(self._d.naconmax),
            "nconmax_per_world": self._nconmax_per_world,
            "njmax": int(self._d.njmax),
            "nacon": int(self._d.nacon.numpy()[0]),
            "max_nefc": int(self._d.nefc.numpy().max()),
            # The last substep's constraint-solver iterations over the worlds. On CUDA the solver
            # loops until every world has converged, so the slowest world sets the cost.
            "solver_niter_mean": float(self._d.solver_niter.numpy().mean()),
            "solver_niter_max": int(self._d.solver_niter.numpy().max()),
            # Worlds whose current episode overflowed, and worlds that overflowed in any episode
            # since the backend was built; each with the buffers that overflowed.
            "overflow_worlds": int((overflow != 0).sum().item()),
            "overflow_kinds": _overflow_kinds(overflow),
            "overflow_worlds_since_build": overflowed_since_build,
            "overflow_kinds_since_build": _overflow_kinds(history),
            "altered_worlds": overflowed_since_build,  # the contract's name for the same worlds
        }

    def _close(self) -> None:
        self._graphs.clear()
        self._publish_graph = None

    # ---- internals ----------------------------------------------------------------
    def _substeps(self, substeps: int) -> None:
        for _ in range(substeps):
            mjw.step(self._m, self._d)
        self._publish()
        if self._contacts:
            publish_contacts(self._m, self._d, self._contacts)

    def _publish(self) -> None:
        """Recompute every derived view from qpos/qvel (no integration, no collision)."""
        m, d = self._m, self._d
        mjw.kinematics(m, d)
        mjw.com_pos(m, d)
        if self._has_cameras:
            mjw.camlight(m, d)
        mjw.com_vel(m, d)
        mjw.sensor_pos(m, d)
        mjw.sensor_vel(m, d)
        wp.launch(body_origin_velocity, dim=(d.nworld, m.nbody),
                  inputs=[d.cvel, d.xpos, d.subtree_com, self._rootid],
                  outputs=[self._lin_vel, self._ang_vel])
        if self._scans:
            publish_scans(d, self._scans)

    def _warm_up(self, mjmodel: mujoco.MjModel, nconmax: int, njmax: int) -> None:
        # Graph capture records launches and cannot compile modules; load every kernel once
        # on a one-world scratch copy (same buffer sizes, which some kernels specialise on)
        # so the real worlds never take a physics step here.
        scratch = mjw.make_data(mjmodel, nworld=1, nconmax=nconmax, njmax=njmax)
        mjw.step(self._m, scratch)
        mjw.forward(self._m, scratch)
        m, d = self._m, scratch
        for fn in (mjw.kinematics, mjw.com_pos, mjw.com_vel, mjw.sensor_pos, mjw.sensor_vel):
            fn(m, d)
        if self._has_cameras:
            mjw.camlight(m, d)
        wp.launch(body_origin_velocity, dim=(1, m.nbody),
                  inputs=[d.cvel, d.xpos, d.subtree_com, self._rootid],
                  outputs=[wp.zeros((1, m.nbody), dtype=wp.vec3), wp.zeros((1, m.nbody), dtype=wp.vec3)])
        c = self._contacts
        if c:  # the contact pass too, into one-world scratch buffers
            publish_contacts(m, d, {**c, **contact_buffers(c["rows"], 1, int(scratch.naconmax))})
        if self._scans:  # and the height scans
            publish_scans(d, [{**t, **scan_buffers(t["pattern"].shape[0], 1)} for t in self._scans])

    def _capture(self, body) -> Any:
        try:
            with wp.ScopedDevice(self._wp_device), wp.ScopedCapture(device=self._wp_device) as cap:
                body()
        except Exception as exc:  # noqa: BLE001 - any capture failure means: run eagerly, say so
            self._eager_reason = f"graph capture failed on {self._wp_device}: {type(exc).__name__}: {exc}"
            # Out loud as well as in diagnostics(): the physics is the same, the step is slower.
            warnings.warn(f"mjwarp: {self._eager_reason}; stepping eagerly instead", RuntimeWarning)
            return None
        if self._cuda:
            wp.synchronize_device(self._wp_device)
        return cap.graph

    def _launch(self, graph: Any) -> None:
        if self._cuda:
            wp.capture_launch(graph, stream=self._torch_stream())
        else:
            wp.capture_launch(graph)

    def _scope(self):
        return wp.ScopedStream(self._torch_stream()) if self._cuda else wp.ScopedDevice(self._wp_device)

    def _torch_stream(self):
        stream = torch.cuda.current_stream(self.device)
        if stream.cuda_stream != self._stream_key:  # cache: stream_from_torch allocates a wrapper
            self._stream = wp.stream_from_torch(stream)
            self._stream_key = stream.cuda_stream
        return self._stream

    def _step_mode(self) -> str:
        # A substeps count whose step graph failed to capture steps eagerly (eager_reason says why).
        if not self._use_graph or any(g is None for g in self._graphs.values()):
            return "eager"
        return "cuda_graph" if self._cuda else "cpu_graph"


def _overflow_kinds(bits_per_world: torch.Tensor) -> list[str]:
    """Names of the mujoco_warp buffers whose overflow bit is set in any world."""
    bits = 0
    for value in bits_per_world.unique().tolist():
        bits |= int(value)
    return [t.name for t in mjw.OverflowType if t.value and t.name != "ALL" and bits & t.value == t.value]


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
