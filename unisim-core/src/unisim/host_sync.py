"""Find host syncs by what torch dispatches, on any device (CPU included).

A GPU run can ask CUDA (``torch.cuda.set_sync_debug_mode``); CI has no GPU. What forces a
host sync is visible one level up, in the aten ops a region dispatches: an op whose output
shape depends on tensor values (``nonzero``, ``masked_select``, boolean indexing,
``unique``...), a scalar read (``item``/``bool``/``float`` -> ``_local_scalar_dense``), or a
copy to the host (``tolist``/``numpy``, which dispatch nothing on CPU and are caught by
name). ``HostSyncProbe`` records those, and counts every op; ``kernel_op_count`` leaves
out views (slices, expands...), so on a GPU it approximates the kernels the region
launches, the number that makes a small-tensor step launch-bound.

    with HostSyncProbe() as probe:
        env.step(action)
    assert probe.syncs == [], probe.syncs
"""

from __future__ import annotations

import contextlib
import traceback
from collections import Counter
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops whose result the host must wait for, whatever their arguments.
_SYNC_OPS = frozenset({
    "_local_scalar_dense", "nonzero", "argwhere", "masked_select", "_unique", "_unique2", "unique_dim",
    "unique_consecutive", "equal", "allclose",
})
# Python-level host reads that dispatch no aten op on CPU.
_HOST_READS = ("tolist", "numpy")


def _op_name(func) -> str:
    return func.overloadpacket.__name__


def _is_sync(func, args, kwargs) -> bool:
    name = _op_name(func)
    if name in _SYNC_OPS:
        return True
    if name in ("index", "index_put", "index_put_", "_index_put_impl_"):
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    if name == "repeat_interleave":
        return isinstance(args[0], torch.Tensor) and kwargs.get("output_size") is None and (
            len(args) < 2 or isinstance(args[1], torch.Tensor))
    if name in ("_to_copy", "copy_"):  # device -> host copies (only seen on a GPU)
        src = args[1] if name == "copy_" else args[0]
        dst_device = args[0].device if name == "copy_" else kwargs.get("device")
        return (isinstance(src, torch.Tensor) and src.device.type != "cpu"
                and dst_device is not None and torch.device(dst_device).type == "cpu")
    return False


class HostSyncProbe(TorchDispatchMode):
    """Records host-sync points (op name and the caller's source line) and counts ops."""

    def __init__(self) -> None:
        super().__init__()
        self.syncs: list[str] = []
        self.ops: Counter[str] = Counter()
        self.kernel_op_count = 0  # ops that compute (views excluded)
        self._paused = 0
        self._patched: dict[str, object] = {}

    @property
    def op_count(self) -> int:
        return sum(self.ops.values())

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Ignore a region (e.g. a host-bridge backend that syncs by design)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    @contextlib.contextmanager
    def ignoring(self, obj: object, *methods: str) -> Iterator[None]:
        """Ignore what the named methods of ``obj`` dispatch while the block runs (e.g. a
        host-bridge backend's ``step``, which syncs by design)."""
        shadowed = {name: obj.__dict__.get(name) for name in methods}
        for name in methods:
            original = getattr(obj, name)

            def call_paused(*args, _original=original, **kwargs):
                with self.paused():
                    return _original(*args, **kwargs)

            setattr(obj, name, call_paused)
        try:
            yield
        finally:
            for name, previous in shadowed.items():
                if previous is None:
                    delattr(obj, name)
                else:
                    setattr(obj, name, previous)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._paused:
            self.ops[_op_name(func)] += 1
            self.kernel_op_count += not func.is_view
            if _is_sync(func, args, kwargs):
                self._record(_op_name(func))
        return func(*args, **kwargs)

    def _record(self, what: str) -> None:
        frames = [f for f in traceback.extract_stack()[:-2] if f.filename != __file__
                  and "/torch/" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        self.syncs.append(f"{what} at {where}")

    def __enter__(self):
        for name in _HOST_READS:
            original = getattr(torch.Tensor, name)
            self._patched[name] = original

            def host_read(tensor, *args, _name=name, _original=original, **kwargs):
                if not self._paused:
                    self._record(f"Tensor.{_name}")
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, host_read)
        return super().__enter__()

    def __exit__(self, *exc):
        for name, original in self._patched.items():
            setattr(torch.Tensor, name, original)
        self._patched.clear()
        return super().__exit__(*exc)
