"""Genesis adapter: DEVICE data plane (gs.gpu on CUDA, gs.cpu on the CPU).

Trade-offs, decided here:
- Genesis owns its state tensors and its getters return copies, so the public views cannot be
  Genesis's own tensors. They are tensors preallocated once and refreshed after ``step`` and
  ``set_state`` by one permuted copy each (``index_select``) from Genesis's zero-copy views of
  the solver buffers its getters clone (``genesis_buffers``): the getters' values bit for bit,
  without their clone of the whole buffer and their index handling. Where Genesis has no such
  views, the six getters (get_qpos, get_dofs_velocity, get_links_pos/quat/vel/ang) are used.
- Layout: links/joints are matched to MuJoCo bodies/joints BY NAME once at construction and
  turned into index tensors (qpos, qvel, body); the views are in MuJoCo order even when
  Genesis orders things its own way. The world body is Genesis's "world" link.
- Sensors: Genesis drops MJCF ``<sensor>`` silently, so the declared kinds are computed from
  link states plus the attachment offsets in the MjModel (``link_sensors``); a model with
  any other kind is refused (fail closed).
- PD control: Genesis imports kp/kv from MJCF position actuators but applies nothing until
  ``control_dofs_position`` is called, so every ``step`` sends ctrl (MuJoCo actuator order,
  clamped to ctrlrange as MuJoCo does) to the actuated dofs, as one dofs range where they form
  one run (no host sync on CUDA; a tensor index costs two). Gains and force ranges are set
  explicitly from the MjModel so they do not depend on Genesis's importer.
- ``gs.init`` may run once per process: the first backend picks gs.cpu or gs.gpu, and a
  later request for the other one fails closed.
- ``set_state``: set_dofs_velocity (no forward pass), then set_qpos keeping that velocity,
  both only for ``rows``; set_qpos's forward pass updates link poses and velocities without a
  step, then the views are refreshed, so publication is IMMEDIATE. Genesis keeps no per-env time.
- ``set_state_where`` (DEVICE_MASKED_RESET): the same two setters given the whole batch and the
  boolean mask as ``envs_idx``. Genesis blends the masked rows in with ``torch.where`` and runs
  its masked forward pass, so no row count is read back; the cost is the setters and one view
  refresh on every call, reset rows or not.
- Contact sensing (contract 1.3) reads Genesis's own contact forces of the last ``scene.step``:
  ANY rows from ``get_links_net_contact_force`` (Genesis sums every contact of a link, self
  contacts included); BODIES and SELF rows from the rigid solver's contact list
  (``collider.get_contacts(is_padded=True)``: fixed capacity, so no host sync to trim it), each
  contact's force on its link A/B kept where the other link passes the row's filter, through
  one precomputed sign table over link pairs (one gather and one batched matmul per step).
  With zero-copy views the list is gathered as ``get_contacts`` gathers it, for the three
  fields used (link_a, link_b, force) instead of all eight.
  GEOMS is not declared: Genesis renumbers and merges geoms, and MJCF geom names do not
  survive its importer. Rows written by ``set_state`` are cleared
  (``ContactAfterReset.CLEARED``); Genesis's force buffers are only read after a step.
- Height scans (contract 1.5) are not declared: Genesis's MJCF importer skips heightfield geoms
  (with a warning), and its own ray-cast sensor is not wired into this adapter. A request is
  refused before anything is built, naming ``Feature.HEIGHT_SCAN``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import mujoco
import torch

from unisim.adapters.genesis_buffers import contact_views, state_views
from unisim.adapters.genesis_runtime import build_scene, genesis_backend_for
from unisim.adapters.link_sensors import SENSOR_KINDS, LinkStateSensors
from unisim.capabilities import Capabilities, DataPlane, Feature, ResetPublication
from unisim.contacts import (
    ContactAfterReset,
    ContactFilter,
    ContactPlan,
    ContactSensorSpec,
    in_contact_from_force,
)
from unisim.contract import Rows, SimBackend
from unisim.devices import resolve_device
from unisim.errors import ContractViolation
from unisim.height_scan import HeightScanSpec
from unisim.mjcf import (
    build_inventory,
    check_sensor_kinds,
    load_model,
    resolve_contact_sensors,
    resolve_height_scans,
)
from unisim.views import BackendViews

OPTIONS = ("validate",)
CONTACT_FILTERS = frozenset({ContactFilter.ANY, ContactFilter.BODIES, ContactFilter.SELF})


def make(model: str | Path, num_envs: int, device: str | torch.device | None = None,
         contact_sensors: tuple[ContactSensorSpec, ...] = (), height_scans: tuple[HeightScanSpec, ...] = (),
         **options) -> GenesisBackend:
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ContractViolation(f"options: unknown genesis option(s) {unknown}; valid: {list(OPTIONS)}")
    mjmodel = load_model(model)
    resolve_height_scans(height_scans, mjmodel, "genesis", declared=False)  # fails closed on any request
    check_sensor_kinds(mjmodel, SENSOR_KINDS, "genesis")
    _check_actuators(mjmodel)
    plan = resolve_contact_sensors(contact_sensors, mjmodel, CONTACT_FILTERS, "genesis")
    resolved = resolve_device(device)
    sensors = LinkStateSensors(mjmodel, resolved)  # refuses what it cannot compute, before any build
    backend = genesis_backend_for(resolved)
    if isinstance(model, str) and model.lstrip().startswith("<"):
        # Genesis loads MJCF from files only; the string already compiled with MuJoCo above.
        fd, tmp = tempfile.mkstemp(suffix=".xml", prefix="unisim_genesis_")
        with os.fdopen(fd, "w") as f:
            f.write(model)
        try:
            return GenesisBackend(mjmodel, Path(tmp), num_envs, resolved, backend, sensors,
                                  validate=options.get("validate", True), contact_plan=plan)
        finally:
            os.unlink(tmp)
    return GenesisBackend(mjmodel, Path(model), num_envs, resolved, backend, sensors,
                          validate=options.get("validate", True), contact_plan=plan)


def _check_actuators(model: mujoco.MjModel) -> None:
    """Only joint position servos map onto Genesis's PD control; refuse anything else."""
    for a in range(model.nu):
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        joint = int(model.actuator_trnid[a, 0])
        ok = (int(model.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
              and int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
              and int(model.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED)
              and int(model.jnt_type[joint]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
              and float(model.actuator_gear[a, 0]) == 1.0)
        if not ok:
            raise ContractViolation(
                f"model: actuator {name!r} is not a joint position servo (<position> on a hinge/slide, "
                "gear 1); the genesis adapter maps only those onto Genesis PD control")


class GenesisBackend(SimBackend):
    """``num_envs`` Genesis envs of one MJCF model; see the module docstring."""

    def __init__(self, mjmodel: mujoco.MjModel, path: Path, num_envs: int, device: torch.device,
                 gs_backend: Any, sensors: LinkStateSensors, validate: bool = True,
                 contact_plan: ContactPlan | None = None) -> None:
        super().__init__(num_envs, validate)
        self._inventory = build_inventory(mjmodel)
        features = {Feature.BODY_VIEWS, Feature.CONTACT_SENSORS, Feature.DEVICE_MASKED_RESET}
        if mjmodel.nsensor:
            features.add(Feature.SENSOR_VIEWS)
        self._capabilities = Capabilities(
            data_plane=DataPlane.DEVICE, device=device,
            selected_reset_publication=ResetPublication.IMMEDIATE, features=frozenset(features),
            sensor_kinds=SENSOR_KINDS if mjmodel.nsensor else frozenset(), contact_filters=CONTACT_FILTERS,
            contact_after_reset=ContactAfterReset.CLEARED)
        self._scene, self._robot = build_scene(mjmodel, path, num_envs, gs_backend)
        self._build_maps(mjmodel, device)
        self._sensors = sensors
        n, nb = num_envs, mjmodel.nbody
        f32 = {"dtype": torch.float32, "device": device}
        self._state = state_views(self._scene)  # None: the getters
        if self._state is not None:
            robot = self._robot
            self._q_idx = self._qpos_perm + robot.q_start  # solver-global columns, MuJoCo order
            self._dof_idx = self._qvel_perm + robot.dof_start
            self._link_idx = self._body_perm + robot.link_start
            self._rel_pos = torch.empty((n, nb, 3), **f32)  # scratch for the link linear velocity
            self._cross = torch.empty((n, nb, 3), **f32)
        self._views = BackendViews(
            qpos=torch.zeros((n, mjmodel.nq), **f32), qvel=torch.zeros((n, mjmodel.nv), **f32),
            body_pos_w=torch.zeros((n, nb, 3), **f32), body_quat_w=torch.zeros((n, nb, 4), **f32),
            body_lin_vel_w=torch.zeros((n, nb, 3), **f32), body_ang_vel_w=torch.zeros((n, nb, 3), **f32),
            sensordata=torch.zeros((n, mjmodel.nsensordata), **f32),
            contacts=self._contact_buffers(mjmodel, contact_plan, device))
        self._physics_steps = 0
        self._env_steps = 0
        self._set_state_calls = 0
        self._refresh()

    def _build_maps(self, mjmodel: mujoco.MjModel, device: torch.device) -> None:
        robot = self._robot
        links = {link.name: link.idx_local for link in robot.links}
        joints = {joint.name: joint for joint in robot.joints}
        body_perm = []
        for body in self._inventory.bodies:
            if body.name not in links:
                raise ContractViolation(
                    f"model: body {body.name!r} has no Genesis link (Genesis merged or renamed it); "
                    f"links: {sorted(links)}")
            body_perm.append(links[body.name])
        qpos_perm, qvel_perm = [0] * mjmodel.nq, [0] * mjmodel.nv
        for info in self._inventory.joints:
            joint = joints.get(info.name)
            if joint is None:
                raise ContractViolation(f"model: joint {info.name!r} has no Genesis joint; joints: {sorted(joints)}")
            qs, dofs = list(joint.qs_idx_local), list(joint.dofs_idx_local)
            if len(qs) != info.qpos_width or len(dofs) != info.qvel_width:
                raise ContractViolation(f"model: joint {info.name!r} has a different width in Genesis")
            qpos_perm[info.qpos_adr:info.qpos_adr + info.qpos_width] = qs
            qvel_perm[info.qvel_adr:info.qvel_adr + info.qvel_width] = dofs
        as_index = lambda xs: torch.tensor(xs, dtype=torch.int64, device=device)
        self._body_perm = as_index(body_perm)  # MuJoCo body b <- Genesis link body_perm[b]
        self._qpos_perm = as_index(qpos_perm)  # MuJoCo qpos column i <- Genesis q qpos_perm[i]
        self._qvel_perm = as_index(qvel_perm)
        # Inverse maps for writing: Genesis q column qpos_perm[i] <- MuJoCo column i; None where the
        # layouts agree (the setters only read the state they are given, so it goes as it is).
        self._qpos_inv = None if qpos_perm == list(range(mjmodel.nq)) else torch.argsort(self._qpos_perm)
        self._qvel_inv = None if qvel_perm == list(range(mjmodel.nv)) else torch.argsort(self._qvel_perm)
        act_dofs = [joints[a.joint].dofs_idx_local[0] for a in self._inventory.actuators]
        self._act_dofs = as_index(act_dofs)
        # control_dofs_position writes the targets, the control mode and a zero velocity target
        # through the dofs index it is given. A range becomes slices there: plain copies and
        # fills. A tensor index makes it write the two constants by advanced indexing, which on
        # CUDA copies each one to the device and waits for it, two host syncs per step. So the
        # targets go as one range when the actuated dofs form one run (the G1's do), reordered
        # to ascending dofs if the actuators list them otherwise.
        run = sorted(act_dofs)
        if act_dofs and run == list(range(run[0], run[0] + len(run))):
            self._ctrl_dofs: range | torch.Tensor = range(run[0], run[-1] + 1)
            self._ctrl_order = None if run == act_dofs else torch.argsort(self._act_dofs)
        else:
            self._ctrl_dofs, self._ctrl_order = self._act_dofs, None
        lo = [a.ctrl_range[0] if a.ctrl_range else -float("inf") for a in self._inventory.actuators]
        hi = [a.ctrl_range[1] if a.ctrl_range else float("inf") for a in self._inventory.actuators]
        self._ctrl_lo = torch.tensor(lo, dtype=torch.float32, device=device)
        self._ctrl_hi = torch.tensor(hi, dtype=torch.float32, device=device)
        if act_dofs:
            kp = torch.tensor([a.kp for a in self._inventory.actuators], dtype=torch.float32, device=device)
            kv = torch.tensor([a.kv for a in self._inventory.actuators], dtype=torch.float32, device=device)
            robot.set_dofs_kp(kp, self._act_dofs)
            robot.set_dofs_kv(kv, self._act_dofs)
            force = torch.tensor([
                tuple(mjmodel.actuator_forcerange[a]) if mjmodel.actuator_forcelimited[a] else (-float("inf"), float("inf"))
                for a in range(mjmodel.nu)], dtype=torch.float32, device=device)
            robot.set_dofs_force_range(force[:, 0], force[:, 1], self._act_dofs)

    # ---- physics ------------------------------------------------------------------
    def _step(self, ctrl: torch.Tensor, substeps: int) -> None:
        if self._act_dofs.numel():
            target = torch.clamp(ctrl, self._ctrl_lo, self._ctrl_hi)
            if self._ctrl_order is not None:
                target = target[:, self._ctrl_order]
            self._robot.control_dofs_position(target, self._ctrl_dofs)
        for _ in range(substeps):
            self._scene.step(update_visualizer=False, refresh_visualizer=False)
        self._physics_steps += substeps
        self._env_steps += 1
        self._refresh()
        if self._contact_rows:
            self._refresh_contacts()

    def _set_state(self, rows: Rows, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self._write_state(rows, qpos, qvel)
        self._contact_force.index_fill_(0, rows, 0.0)  # no contact solve has run for the new state
        self._in_contact.index_fill_(0, rows, False)

    def _set_state_where(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self._write_state(mask, qpos, qvel)
        self._contact_force.masked_fill_(mask[:, None, None], 0.0)
        self._in_contact.masked_fill_(mask[:, None], False)

    def _write_state(self, envs: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """``envs``: row indices with one row of state each, or an (N,) mask with the whole batch."""
        robot = self._robot
        # Velocity first without a forward pass, then qpos keeping that velocity: set_qpos's one
        # forward pass then publishes link poses AND velocities (seen ~10x cheaper on CPU than
        # set_qpos(zero_velocity=True) followed by set_dofs_velocity's own forward pass).
        qvel = qvel if self._qvel_inv is None else qvel[:, self._qvel_inv]
        qpos = qpos if self._qpos_inv is None else qpos[:, self._qpos_inv]
        robot.set_dofs_velocity(qvel, envs_idx=envs, skip_forward=True)
        robot.set_qpos(qpos, envs_idx=envs, zero_velocity=False)
        self._set_state_calls += 1
        self._refresh()

    # ---- contacts -----------------------------------------------------------------
    def _contact_buffers(self, mjmodel: mujoco.MjModel, plan: ContactPlan | None, device: torch.device):
        """Preallocated contact views and the index tables that fill them (see the module docstring)."""
        plan = plan if plan is not None else ContactPlan((), (), (), (), ())
        n, rows = self.num_envs, plan.rows
        self._contact_rows = rows
        self._contact_force = torch.zeros((n, rows, 3), dtype=torch.float32, device=device)
        self._in_contact = torch.zeros((n, rows), dtype=torch.bool, device=device)
        self._contact_thresholds = torch.tensor(plan.thresholds, dtype=torch.float32, device=device)
        as_index = lambda xs: torch.tensor(xs, dtype=torch.int64, device=device)
        any_rows = [t for t in plan.targets if t.filter is ContactFilter.ANY]
        self._any_rows = as_index([t.row for t in any_rows])
        self._any_links = self._body_perm[as_index([t.body for t in any_rows])] if any_rows else self._any_rows
        self._any_links_global = self._any_links + self._robot.link_start
        # Filtered rows: sensed MuJoCo body and, per row, which MuJoCo bodies may be the other side.
        filtered = [t for t in plan.targets if t.filter is not ContactFilter.ANY]
        by_row: dict[int, set[int]] = {}
        for t in filtered:
            if t.filter is ContactFilter.BODIES:
                by_row.setdefault(t.row, set()).add(t.other)
            else:  # SELF: every other body of the tree rooted at t.other
                by_row[t.row] = {b for b in range(mjmodel.nbody)
                                 if int(mjmodel.body_rootid[b]) == t.other and b != t.body and b != 0}
        rows_f = sorted(by_row)
        self._filtered_rows = as_index(rows_f)
        sensed = as_index([next(t.body for t in filtered if t.row == r) for r in rows_f])
        allowed = torch.zeros((mjmodel.nbody, len(rows_f)), dtype=torch.float32, device=device)
        for j, r in enumerate(rows_f):
            allowed[sorted(by_row[r]), j] = 1.0  # (nbody, filtered rows): 1 where that body passes the row's filter
        # Genesis global link index -> MuJoCo body index. Links of other entities (the ground)
        # count as the world, so a contact that touches no sensed body weighs 0 below.
        self._collider = self._scene.rigid_solver.collider
        n_links = self._scene.rigid_solver.n_links
        link_body = torch.zeros(n_links, dtype=torch.int64, device=device)
        link_body[self._body_perm + self._robot.link_start] = torch.arange(mjmodel.nbody, device=device)
        # One table over contact pairs (link A, link B), each shifted by one so that 0 stands for
        # "no contact": per filtered row, -1 where A is the sensed body and B passes the row's
        # filter (the contact force acts on A negated), +1 where B is and A passes, 0 otherwise.
        # A refresh is then one gather and one batched matmul over the padded contact list.
        on_first = (link_body[:, None, None] == sensed) * allowed[link_body][None, :, :]  # (A, B, rows)
        sign = torch.zeros((n_links + 1, n_links + 1, len(rows_f)), dtype=torch.float32, device=device)
        sign[1:, 1:] = on_first.transpose(0, 1) - on_first
        self._pair_sign = sign.flatten(0, 1)
        self._pair_stride = n_links + 1
        self._contact_slots = torch.zeros(0, dtype=torch.int32, device=device)  # sized at the first read
        self._contact_src = contact_views(self._collider) if rows_f else None  # None: get_contacts
        return plan.views(self._contact_force, self._in_contact)

    def _refresh_contacts(self) -> None:
        force = self._contact_force
        if self._any_rows.numel():
            if self._state is None:
                net = self._robot.get_links_net_contact_force()
                force[:, self._any_rows] = net[:, self._any_links]
            else:  # get_links_net_contact_force's buffer, through solver-global link indices
                force[:, self._any_rows] = self._state["contact_force"][:, self._any_links_global]
        if self._filtered_rows.numel():
            link_a, link_b, contact_force, n_contacts = self._contact_list()
            if self._contact_slots.numel() != link_a.shape[-1]:
                self._contact_slots = torch.arange(link_a.shape[-1], dtype=torch.int32, device=link_a.device)
            live = self._contact_slots < n_contacts[:, None]  # slots past an env's count are stale
            stride = self._pair_stride
            # Stale slots to row 0 by a multiply in place: torch.where against a Python 0 would make
            # a device tensor of it, a fill kernel, at every step.
            pair = link_b.add(link_a, alpha=stride).add_(stride + 1).mul_(live)
            # (N, C, rows): the table's rows for each contact, by index_select (a plain row copy; advanced
            # indexing gives the same values ~3x slower on CPU)
            sign = torch.index_select(self._pair_sign, 0, pair.flatten()).view(*pair.shape, self._pair_sign.shape[1])
            force[:, self._filtered_rows] = torch.bmm(sign.transpose(1, 2), contact_force)
        in_contact_from_force(force, self._contact_thresholds, self._in_contact)

    def _contact_list(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(link_a, link_b, force, n_contacts) of the padded contact list, as get_contacts(is_padded=True)
        gives them: its zero-copy path, for the three fields used."""
        src = self._contact_src
        if src is None:
            c = self._collider.get_contacts(as_tensor=True, to_torch=True, is_padded=True)
            return c["link_a"], c["link_b"], c["force"], c["n_contacts"]
        if src["sort_idx"] is None:  # Genesis keeps the buffers in contact order
            return src["link_a"], src["link_b"], src["force"], src["n_contacts"]
        # Sorted contacts: gather the full capacity through the sort permutation, whose entries past
        # the live range may be stale, clamped in bounds (get_contacts's own padded gather).
        sort_idx = src["sort_idx"]
        idx = sort_idx.clamp(0, sort_idx.shape[1] - 1)
        return (src["link_a"].gather(1, idx), src["link_b"].gather(1, idx),
                src["force"].gather(1, idx.unsqueeze(-1).expand(-1, -1, 3)), src["n_contacts"])

    def _refresh(self) -> None:
        v, s = self._views, self._state
        if s is None:
            robot, bp = self._robot, self._body_perm
            torch.index_select(robot.get_qpos(), 1, self._qpos_perm, out=v.qpos)
            torch.index_select(robot.get_dofs_velocity(), 1, self._qvel_perm, out=v.qvel)
            torch.index_select(robot.get_links_pos(), 1, bp, out=v.body_pos_w)
            torch.index_select(robot.get_links_quat(), 1, bp, out=v.body_quat_w)
            torch.index_select(robot.get_links_vel(), 1, bp, out=v.body_lin_vel_w)
            torch.index_select(robot.get_links_ang(), 1, bp, out=v.body_ang_vel_w)
        else:
            links = self._link_idx
            torch.index_select(s["qpos"], 1, self._q_idx, out=v.qpos)
            torch.index_select(s["dofs_vel"], 1, self._dof_idx, out=v.qvel)
            torch.index_select(s["pos"], 1, links, out=v.body_pos_w)
            torch.index_select(s["quat"], 1, links, out=v.body_quat_w)
            torch.index_select(s["cd_ang"], 1, links, out=v.body_ang_vel_w)
            # get_links_vel at the link origin: cd_vel + cd_ang x (pos - root_COM), the same float ops
            rel = torch.index_select(s["root_COM"], 1, links, out=self._rel_pos)
            torch.sub(v.body_pos_w, rel, out=rel)
            torch.linalg.cross(v.body_ang_vel_w, rel, dim=-1, out=self._cross)
            torch.index_select(s["cd_vel"], 1, links, out=v.body_lin_vel_w).add_(self._cross)
        if v.sensordata.shape[1]:
            self._sensors.compute(v.sensordata, v.qpos, v.qvel, v.body_pos_w, v.body_quat_w,
                                  v.body_lin_vel_w, v.body_ang_vel_w)

    def diagnostics(self) -> dict[str, Any]:
        return {
            "backend_device": str(self.device),
            "step_mode": "genesis_scene_step",
            "physics_steps": self._physics_steps,
            "env_steps": self._env_steps,
            "set_state_calls": self._set_state_calls,
            "getter_calls_per_refresh": 6 if self._state is None else 0,
            "state_reads": "getters" if self._state is None else "zero-copy views",
            "contact_reads": ("unused" if not self._filtered_rows.numel() else
                              "get_contacts" if self._contact_src is None else "zero-copy views"),
            "sensors": "computed from link states (Genesis drops MJCF sensors)",
            # This adapter reads no count of contacts or constraint rows Genesis may have dropped,
            # so it cannot tell how many worlds were altered.
            "altered_worlds": None,
        }

