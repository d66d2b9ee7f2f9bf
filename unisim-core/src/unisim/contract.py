"""SimBackend contract v1: the only way code above unisim reaches a simulator.

An adapter subclasses ``SimBackend``, implements the ``_``-prefixed hooks, and inherits the
public methods, which validate input (raising ``ContractViolation`` before any state
changes) and then delegate. Validation costs at most one bounded device sync (the
non-finite check); pass ``validate=False`` to ``create_backend`` to skip it in a hot loop
whose caller is proven.
"""

from __future__ import annotations

import abc
from typing import Any

import torch

from unisim.capabilities import Capabilities
from unisim.errors import ContractViolation
from unisim.inventory import Inventory, StateWidths
from unisim.views import BackendViews

CONTRACT_VERSION = "1.5.0"

Rows = torch.Tensor  # int64, 1-D, unique, in [0, num_envs)
Mask = torch.Tensor  # bool, (num_envs,)


class SimBackend(abc.ABC):
    """A batched simulation of ``num_envs`` copies of one MJCF model."""

    num_envs: int
    validate: bool  # False skips the input checks that cost a device sync (proven callers only)
    # Set once by every adapter's constructor; the accessors below serve them.
    _capabilities: Capabilities
    _inventory: Inventory
    _views: BackendViews

    def __init__(self, num_envs: int, validate: bool = True) -> None:
        self.num_envs = num_envs
        self.validate = validate
        self._closed = False
        # Per-env trailing shape of each model field, read once: reading a field makes a copy
        # (a loop over per-env models on the host bridge), too much for a shape check per write.
        self._model_field_shapes: dict[str, torch.Size] = {}
        self._quat_columns: torch.Tensor | None = None  # qpos columns of free/ball joint quaternions

    # ---- declarations -------------------------------------------------------------
    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def inventory(self) -> Inventory:
        return self._inventory

    def state_widths(self) -> StateWidths:
        return self.inventory().widths

    @property
    def device(self) -> torch.device:
        return self.capabilities.device

    @property
    def timestep(self) -> float:
        """Physics step length in seconds (one substep)."""
        return self.inventory().timestep

    # ---- lifecycle ----------------------------------------------------------------
    def views(self) -> BackendViews:
        """The live views (an adapter with LAZY publication completes it here)."""
        return self._views

    def step(self, ctrl: torch.Tensor, substeps: int = 1) -> None:
        """Advance every env by ``substeps`` physics steps holding ``ctrl`` (N, nu)."""
        self._check_open()
        if not isinstance(substeps, int) or isinstance(substeps, bool) or substeps < 1:
            raise ContractViolation(f"substeps: expected an int >= 1, got {substeps!r}")
        self._check_tensor("ctrl", ctrl, torch.float32, (self.num_envs, self.state_widths().nu))
        if self.validate:
            self._check_finite("ctrl", ctrl)
        self._step(ctrl, substeps)

    def set_state(self, rows: Rows, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Selected reset: overwrite qpos/qvel of ``rows`` (time and warmstart reset too).

        Postcondition: every public view of those rows is authoritative (kinematics, body
        velocities and sensors of the new state) without any physics step; other rows are
        untouched.
        """
        self._check_open()
        widths = self.state_widths()
        n = self._check_rows_layout(rows)
        self._check_tensor("qpos", qpos, torch.float32, (n, widths.nq))
        self._check_tensor("qvel", qvel, torch.float32, (n, widths.nv))
        if n and self.validate:
            self._check_values(rows, quaternions_ok=self._quaternions_ok(qpos, None), qpos=qpos, qvel=qvel)
        if n:  # dense inputs: an engine's kernels may refuse strided ones midway through a write (a no-op if dense)
            self._set_state(rows.contiguous(), qpos.contiguous(), qvel.contiguous())

    def set_state_where(self, mask: Mask, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Selected reset by mask (contract 1.1): rows where ``mask`` (N,) is True take
        their row of ``qpos`` (N, nq) / ``qvel`` (N, nv); the other rows of those are ignored.

        Same postcondition as ``set_state``. No row count is needed, so an adapter that
        declares ``Feature.DEVICE_MASKED_RESET`` queues the whole call on the device without
        a host sync (validation, when on, still costs one); any other adapter gathers the
        rows itself, which costs one.
        """
        self._check_open()
        widths = self.state_widths()
        self._check_tensor("mask", mask, torch.bool, (self.num_envs,))
        self._check_tensor("qpos", qpos, torch.float32, (self.num_envs, widths.nq))
        self._check_tensor("qvel", qvel, torch.float32, (self.num_envs, widths.nv))
        if self.validate:
            selected = mask.unsqueeze(1)  # values of unselected rows are never read
            finite_q, finite_v, unit = torch.stack([torch.isfinite(qpos).logical_or(~selected).all(),
                                                    torch.isfinite(qvel).logical_or(~selected).all(),
                                                    self._quaternions_ok(qpos, mask)]).tolist()  # one sync
            for arg, ok in (("qpos", finite_q), ("qvel", finite_v)):
                if not ok:
                    raise ContractViolation(f"{arg}: expected finite values in the masked rows, got NaN or inf")
            if not unit:
                raise self._quaternion_violation()
        self._set_state_where(mask.contiguous(), qpos.contiguous(), qvel.contiguous())  # dense, as in set_state

    def set_model_field(self, name: str, rows: Rows, values: torch.Tensor) -> None:
        """Write a per-env model field (e.g. ``geom_friction``) for ``rows``."""
        self._check_open()
        allowed = self.capabilities.model_fields
        self._check_field_name(name)
        if name not in allowed:
            raise ContractViolation(
                f"name: model field {name!r} is not declared writable; declared: {sorted(allowed)}")
        n = self._check_rows_layout(rows)
        if name not in self._model_field_shapes:
            self._model_field_shapes[name] = self.model_field(name).shape[1:]
        self._check_tensor("values", values, torch.float32, (n, *self._model_field_shapes[name]))
        if n and self.validate:
            minimums = self.capabilities.model_field_minimums.get(name)
            self._check_values(rows, minimums={"values": (name, minimums)} if minimums else None, values=values)
        if n:
            self._set_model_field(name, rows.contiguous(), values.contiguous())  # dense, as in set_state

    def model_field(self, name: str) -> torch.Tensor:
        """Current per-env values of a declared writable model field, shape (N, ...)."""
        self._check_open()
        allowed = self.capabilities.model_fields
        self._check_field_name(name)
        if name not in allowed:
            raise ContractViolation(
                f"name: model field {name!r} is not declared; declared: {sorted(allowed)}")
        return self._model_field(name)

    @abc.abstractmethod
    def diagnostics(self) -> dict[str, Any]:
        """Plain-Python facts about the running adapter (counters, fallbacks, overflow).

        Always holds ``physics_steps`` (substeps stepped) and (1.4) ``altered_worlds``: how many
        worlds' physics the simulator changed on its own since the backend was built (contacts
        or constraint rows dropped for a full buffer, a world restarted for an unstable state),
        or None where the adapter cannot tell. Other keys are the adapter's own."""

    def close(self) -> None:
        if not self._closed:
            self._close()
            self._closed = True

    # ---- adapter hooks ------------------------------------------------------------
    @abc.abstractmethod
    def _step(self, ctrl: torch.Tensor, substeps: int) -> None: ...

    @abc.abstractmethod
    def _set_state(self, rows: Rows, qpos: torch.Tensor, qvel: torch.Tensor) -> None: ...

    def _set_state_where(self, mask: Mask, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        # The generic path: gather the rows (the host sync DEVICE_MASKED_RESET adapters avoid).
        rows = mask.nonzero().squeeze(1)
        if rows.numel():
            self._set_state(rows, qpos.index_select(0, rows), qvel.index_select(0, rows))

    def _set_model_field(self, name: str, rows: Rows, values: torch.Tensor) -> None:
        raise ContractViolation(f"name: {name!r} is declared but the adapter does not write it")

    def _model_field(self, name: str) -> torch.Tensor:
        raise ContractViolation(f"name: {name!r} is declared but the adapter does not read it")

    def _close(self) -> None:
        pass

    # ---- validation ---------------------------------------------------------------
    def _quaternions_ok(self, qpos: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """A device flag: every free/ball joint quaternion in the written rows has a usable
        norm (a zero quaternion is no rotation, and engines would publish views that disagree
        with the stored qpos). Read with the other validation flags, in the same sync."""
        if self._quat_columns is None:
            cols = []
            for joint in self.inventory().joints:
                first = joint.qpos_adr + 3 if joint.kind == "free" else joint.qpos_adr
                if joint.kind in ("free", "ball"):
                    cols.append(list(range(first, first + 4)))
            self._quat_columns = torch.tensor(cols, dtype=torch.int64, device=qpos.device).reshape(-1, 4)
        if self._quat_columns.numel() == 0:
            return torch.ones((), dtype=torch.bool, device=qpos.device)
        bad = torch.linalg.vector_norm(qpos[:, self._quat_columns], dim=-1) < 1e-6  # (rows, joints)
        if mask is not None:
            bad = bad & mask.unsqueeze(1)
        return ~bad.any()

    def _quaternion_violation(self) -> ContractViolation:
        return ContractViolation("qpos: expected unit quaternions for free and ball joints (qpos columns "
                                 f"{self._quat_columns.tolist()}), got one of norm < 1e-6")

    def _check_open(self) -> None:
        if self._closed:
            raise ContractViolation("backend: used after close()")

    def _check_field_name(self, name: object) -> None:
        if not isinstance(name, str):  # an unhashable name would escape as a TypeError
            raise ContractViolation(f"name: expected a model field name (str), got {type(name).__name__}")

    def _check_tensor(self, arg: str, t: object, dtype: torch.dtype, shape: tuple[int, ...]) -> None:
        if not isinstance(t, torch.Tensor):
            raise ContractViolation(f"{arg}: expected a torch.Tensor, got {type(t).__name__}")
        if t.dtype != dtype:
            raise ContractViolation(f"{arg}: expected dtype {dtype}, got {t.dtype}")
        if tuple(t.shape) != tuple(shape):
            raise ContractViolation(f"{arg}: expected shape {tuple(shape)}, got {tuple(t.shape)}")
        if t.device != self.device:
            raise ContractViolation(f"{arg}: expected device {self.device}, got {t.device}")
        if t.requires_grad:  # its autograd history would reach the backend's own buffers and views
            raise ContractViolation(f"{arg}: expected a tensor without autograd (requires_grad=False); "
                                    f"pass {arg}.detach()")

    def _check_finite(self, arg: str, t: torch.Tensor) -> None:
        # The one bounded device sync validation may cost.
        if not bool(torch.isfinite(t).all()):
            raise ContractViolation(f"{arg}: expected finite values, got NaN or inf")

    def _check_rows_layout(self, rows: object) -> int:
        """Type, dtype, rank and device of ``rows``: no device sync."""
        if not isinstance(rows, torch.Tensor):
            raise ContractViolation(f"rows: expected an int64 torch.Tensor, got {type(rows).__name__}")
        if rows.dtype != torch.int64:
            raise ContractViolation(f"rows: expected dtype torch.int64, got {rows.dtype}")
        if rows.dim() != 1:
            raise ContractViolation(f"rows: expected a 1-D tensor, got shape {tuple(rows.shape)}")
        if rows.device != self.device:
            raise ContractViolation(f"rows: expected device {self.device}, got {rows.device}")
        return rows.numel()

    def _check_values(self, rows: torch.Tensor, minimums: dict[str, tuple[str, tuple[float, ...]]] | None = None,
                      quaternions_ok: torch.Tensor | None = None, **finite: torch.Tensor) -> None:
        """Range and uniqueness of ``rows``, finiteness of ``finite``, and for each ``minimums``
        entry (argument -> (what it holds, lows)) that the argument is >= the lows along its
        last axis: one device sync."""
        minimums = minimums or {}
        ordered = rows.sort().values
        unique = (ordered[1:] != ordered[:-1]).all() if rows.numel() > 1 else torch.ones((), dtype=torch.bool,
                                                                                          device=rows.device)
        flags = [ordered[0], ordered[-1], unique] + [torch.isfinite(t).all() for t in finite.values()]
        # How far each bounded tensor's lowest element sits above its minimum (< 0: below); an
        # empty one (a model without geoms writing geom_friction) has nothing below.
        flags += [(finite[arg] - torch.tensor(low, device=finite[arg].device)).amin() if finite[arg].numel()
                  else torch.tensor(float("inf"), device=finite[arg].device) for arg, (_, low) in minimums.items()]
        if quaternions_ok is not None:
            flags.append(quaternions_ok)
        lo, hi, is_unique, *rest = torch.stack([f.double() for f in flags]).tolist()
        unit = True
        if quaternions_ok is not None:
            *rest, unit = rest
        is_finite, margins = rest[:len(finite)], rest[len(finite):]
        if lo < 0 or hi >= self.num_envs:
            raise ContractViolation(f"rows: expected indices in [0, {self.num_envs}), got range [{int(lo)}, {int(hi)}]")
        if not is_unique:
            raise ContractViolation("rows: expected unique indices, got duplicates")
        for arg, ok in zip(finite, is_finite, strict=True):
            if not ok:
                raise ContractViolation(f"{arg}: expected finite values, got NaN or inf")
        for (arg, (what, low)), margin in zip(minimums.items(), margins, strict=True):
            if margin < 0:
                raise ContractViolation(f"{arg}: expected every {what} element >= {low} along the last axis (the "
                                        f"backend's declared minimums), got one {-margin:g} below")
        if not unit:
            raise self._quaternion_violation()
