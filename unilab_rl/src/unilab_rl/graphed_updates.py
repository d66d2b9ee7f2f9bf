"""CUDA-graph replay of whole learner updates, and the optimizer flag that makes them capturable."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Hashable

import torch

from unilab_rl.contract import ReplayBatch
from unilab_rl.replay import map_batch

UpdateStep = Callable[[Hashable, ReplayBatch], dict[str, torch.Tensor]]


def uses_cuda_graphs(cuda_graph: bool, device: torch.device) -> bool:
    return cuda_graph and device.type == "cuda"


class CudaGraphUpdates:
    """Runs ``step(variant, batch)`` (one gradient update) from a CUDA graph per variant.

    Why: one FlashSAC update is ~700 (critic only) to ~1400 (critic, actor and temperature)
    small kernels, each launched from Python; replayed from a graph, their launches cost one
    call, and what remains is GPU time (which compile=true cuts further).

    What ``step`` must be, and the FlashSAC and FastSAC updates are: fixed batch shapes; no
    host sync; every state change in place (optimizers built with ``capturable=True``,
    BatchNorm statistics, target networks); randomness from the default CUDA generator,
    whose graph-safe Philox offsets make a replay draw what an eager call would.

    A gradient hook runs inside the capture like the rest of the update, so it must be
    capturable too: the data-parallel NCCL all-reduce is (PyTorch records collectives issued
    during capture into the graph, which every rank then replays in the same order). The
    hook in place at capture is the one each replay runs; changing it afterwards is refused.

    The first ``warmup`` calls of a variant run eagerly on a side stream (optimizer state and
    library workspaces must exist before capture), the next one captures, and every later
    one copies its batch into the captured inputs and replays. Each call is exactly one
    update; the returned metrics are the graph's output tensors, valid until the next call.
    """

    def __init__(self, step: UpdateStep, installed_hook: Callable[[], object | None], warmup: int = 2) -> None:
        self.step = step
        self.installed_hook = installed_hook  # the learner's gradient hook, read at each call
        self.warmup = warmup
        self.eager_calls: Counter[Hashable] = Counter()
        self.graphs: dict[Hashable, tuple[torch.cuda.CUDAGraph, ReplayBatch, dict[str, torch.Tensor]]] = {}
        self.captured_hook: object | None = None

    def __call__(self, variant: Hashable, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        if self.graphs and self.installed_hook() is not self.captured_hook:
            raise RuntimeError("the learner's gradient hook changed after its updates were captured in CUDA "
                               "graphs, which would replay the old one; install the hook before the first "
                               "update or build the learner with cuda_graph=false")
        if variant not in self.graphs:
            if self.eager_calls[variant] < self.warmup:
                self.eager_calls[variant] += 1
                return self._eager_on_side_stream(variant, batch)
            self.graphs[variant] = self._capture(variant, batch)
        graph, static_batch, static_metrics = self.graphs[variant]
        for static, fresh in zip(_batch_tensors(static_batch), _batch_tensors(batch), strict=True):
            static.copy_(fresh)
        graph.replay()
        return static_metrics

    def reset(self) -> None:
        """Forget the captured graphs (after a state load replaced optimizer state tensors)."""
        self.graphs.clear()
        self.eager_calls.clear()

    def _eager_on_side_stream(self, variant: Hashable, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            metrics = self.step(variant, batch)
        torch.cuda.current_stream().wait_stream(side)
        return metrics

    def _capture(self, variant: Hashable, batch: ReplayBatch) -> tuple[torch.cuda.CUDAGraph, ReplayBatch,
                                                                      dict[str, torch.Tensor]]:
        static_batch = _cloned_batch(batch)
        self.captured_hook = self.installed_hook()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_metrics = self.step(variant, static_batch)  # recorded, not run: the caller replays
        return graph, static_batch, static_metrics


def _batch_tensors(batch: ReplayBatch) -> list[torch.Tensor]:
    tensors: list[torch.Tensor] = []
    for field in dataclasses.fields(batch):
        value = getattr(batch, field.name)
        if isinstance(value, dict):
            tensors.extend(value[k] for k in sorted(value))
        else:
            tensors.append(value)
    return tensors


def _cloned_batch(batch: ReplayBatch) -> ReplayBatch:
    return map_batch(batch, torch.clone)


def keep_capturable(optimizer: torch.optim.Optimizer, capturable: bool) -> None:
    """Re-apply this learner's ``capturable`` after ``optimizer.load_state_dict``, which takes
    the saved param groups' flag: a checkpoint from an eager run would break graph capture,
    and one from a graphed run would leave an eager learner's step counters on the GPU, where
    the unfused Adam reads them back to the host every step."""
    for group in optimizer.param_groups:
        group["capturable"] = capturable
        on_device = capturable or group.get("fused", False)  # where torch keeps "step" itself
        for param in group["params"]:
            state = optimizer.state.get(param, {})
            if "step" in state:
                device = param.device if on_device else torch.device("cpu")
                state["step"] = state["step"].to(dtype=torch.float32, device=device)
