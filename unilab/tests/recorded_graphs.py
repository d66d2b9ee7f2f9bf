"""A host stand-in for CUDA graphs, to test ``unilab.step_graphs`` without a GPU.

``RecordedGraphRuntime`` has ``CudaGraphRuntime``'s three calls:
- a capture runs each phase once under a dispatch recorder, then puts every tensor the env
  carries and the generators back as they were (a CUDA capture runs nothing);
- a replay runs the recorded aten ops again on the same tensors, writing each fresh result
  into the tensor the capture produced (a graph's fixed addresses), with none of the
  phase's Python: a counter in Python, a rebound tensor or a branch on a value is frozen,
  as it would be on a GPU;
- a host read inside a phase (a scalar, a value-dependent shape) is refused, as a capture
  would refuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

Call = tuple[Any, tuple, dict, Any]


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        results = out if isinstance(out, tuple | list) else (out,)
        if any(r is not None and not isinstance(r, torch.Tensor) for r in results):
            raise RuntimeError(f"{func} reads a value back to the host inside a captured phase")
        if func is torch.ops.aten.nonzero.default:
            raise RuntimeError(f"{func} has a value-dependent shape inside a captured phase")
        self.calls.append((func, args, kwargs, out))
        return out


def _replay(calls: list[Call]) -> None:
    for func, args, kwargs, out in calls:
        fresh = func(*args, **kwargs)
        returns = func._schema.returns  # one entry per result, or one list-typed entry (split)
        for i, (kept, new) in enumerate(zip(*((o if isinstance(o, tuple | list) else (o,)) for o in (out, fresh)))):
            aliases = returns[min(i, len(returns) - 1)].alias_info is not None  # a view or in-place result
            if isinstance(kept, torch.Tensor) and not aliases:
                kept.copy_(new)


class RecordedGraphRuntime:
    def __init__(self, env, carried: Callable[[Any], dict[str, torch.Tensor]]) -> None:
        self.env = env
        self.carried = carried  # every tensor the env's managers and terms hold
        self.captures = 0

    def eager(self, work: Callable[[], Any]) -> Any:
        return work()

    def capture_all(self, phases: list[Callable[[], Any]]) -> tuple[list[Any], list[Any]]:
        env = self.env
        tensors = self.carried(env)
        saved = {path: t.clone() for path, t in tensors.items()}
        rng, default_rng = env.rng.get_state(), torch.get_rng_state()
        graphs, outputs = [], []
        for phase in phases:
            with _Recorder() as recorder:
                outputs.append(phase())
            graphs.append(recorder.calls)
        for path, value in saved.items():
            tensors[path].copy_(value)
        env.rng.set_state(rng)
        torch.set_rng_state(default_rng)
        self.captures += 1
        return graphs, outputs

    @staticmethod
    def replay(calls: list[Call]) -> None:
        _replay(calls)
