"""Small pieces every learner shares: mixed precision, optimizer steps with a gradient hook,
target-network averaging, CUDA-graph replay of whole updates."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence

import torch
from torch import nn

from unilab_rl.contract import ReplayBatch

# Called with the parameters of one optimizer after backward and before the step; a
# data-parallel wrapper installs an all-reduce here (see issue 6).
GradientHook = Callable[[Sequence[nn.Parameter]], None]


def autocast_context(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """bf16 autocast on CUDA when enabled; a no-op elsewhere (CPU autocast is slower here)."""
    if enabled and device.type == "cuda":
        # No weight-cast cache: a cached cast made during CUDA-graph capture would be stale
        # on replay (the graph must recompute it from the updated weights).
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16, cache_enabled=False)
    return contextlib.nullcontext()


def optimizer_step(
    optimizer: torch.optim.Optimizer,
    loss: torch.Tensor,
    gradient_hook: GradientHook | None,
    max_grad_norm: float = 0.0,
) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if gradient_hook is not None:
        gradient_hook(params)
    if max_grad_norm > 0:
        nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()


def target_network(source: nn.Module) -> nn.Module:
    """A copy of ``source`` that follows it only through ``polyak_update`` (no gradients)."""
    target = copy.deepcopy(source)
    target.requires_grad_(False)
    return target


@torch.no_grad()
def polyak_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target <- (1 - tau) * target + tau * source, for parameters and float buffers
    (BatchNorm running statistics follow the same average)."""
    for target_tensor, source_tensor in zip(_float_state(target), _float_state(source), strict=True):
        target_tensor.lerp_(source_tensor, tau)


def _float_state(module: nn.Module) -> Iterator[torch.Tensor]:
    yield from (p.data for p in module.parameters())
    yield from (b for b in module.buffers() if b.is_floating_point())


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Evaluate ``module`` without building gradients for its parameters."""
    flags = [p.requires_grad for p in module.parameters()]
    module.requires_grad_(False)
    try:
        yield
    finally:
        for p, flag in zip(module.parameters(), flags, strict=True):
            p.requires_grad_(flag)


@contextlib.contextmanager
def eval_mode(module: nn.Module) -> Iterator[None]:
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


def temperature_step(log_temperature: nn.Parameter, optimizer: torch.optim.Optimizer, log_prob: torch.Tensor,
                     target_entropy: float, gradient_hook: GradientHook | None) -> dict[str, torch.Tensor]:
    """SAC's learned temperature: move the policy's entropy toward ``target_entropy``."""
    entropy = -log_prob.detach().float().mean()
    loss = log_temperature.exp() * (entropy - target_entropy)
    optimizer_step(optimizer, loss, gradient_hook)
    return {"actor/entropy": entropy, "actor/temperature": log_temperature.detach().exp(),
            "actor/temperature_loss": loss.detach()}


UpdateStep = Callable[[Hashable, ReplayBatch], dict[str, torch.Tensor]]


def uses_cuda_graphs(cuda_graph: bool, device: torch.device) -> bool:
    return cuda_graph and device.type == "cuda"


class CudaGraphUpdates:
    """Runs ``step(variant, batch)`` (one gradient update) from a CUDA graph per variant.

    Why: one FlashSAC update is ~700 (critic only) to ~1400 (critic, actor and temperature)
    small kernels; launched one by one from Python the learner is launch-bound, not
    compute-bound, at batch 8192 on an H200. A replay launches the whole update at once.

    What ``step`` must be, and the FlashSAC and FastSAC updates are: fixed batch shapes; no
    host sync; every state change in place (optimizers built with ``capturable=True``,
    BatchNorm statistics, target networks); randomness from the default CUDA generator,
    whose graph-safe Philox offsets make a replay draw what an eager call would.

    The first ``warmup`` calls of a variant run eagerly on a side stream (optimizer state and
    library workspaces must exist before capture), the next one captures, and every later
    one copies its batch into the captured inputs and replays. Each call is exactly one
    update; the returned metrics are the graph's output tensors, valid until the next call.
    """

    def __init__(self, step: UpdateStep, gradient_hook: Callable[[], GradientHook | None], warmup: int = 2) -> None:
        self.step = step
        self.gradient_hook = gradient_hook
        self.warmup = warmup
        self.eager_calls: Counter[Hashable] = Counter()
        self.graphs: dict[Hashable, tuple[torch.cuda.CUDAGraph, ReplayBatch, dict[str, torch.Tensor]]] = {}

    def __call__(self, variant: Hashable, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        if self.gradient_hook() is not None:
            raise RuntimeError("cuda_graph=true cannot capture a gradient hook (the data-parallel all-reduce); "
                               "build the learner with cuda_graph=false")
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
    def clone(value):
        return {k: v.clone() for k, v in value.items()} if isinstance(value, dict) else value.clone()

    return ReplayBatch(**{f.name: clone(getattr(batch, f.name)) for f in dataclasses.fields(batch)})


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


# What every SAC learner checkpoints; each algorithm adds its own normalizers and noise state.
_SAC_MODULES = ("actor", "critic", "target_critic", "actor_optimizer", "critic_optimizer", "temperature_optimizer")


def sac_state_dict(agent) -> dict:
    state = {name: getattr(agent, name).state_dict() for name in _SAC_MODULES}
    state["log_temperature"] = agent.log_temperature.detach().clone()
    state["updates"] = agent.updates
    return state


def load_sac_state_dict(agent, state: dict) -> None:
    for name in _SAC_MODULES:
        getattr(agent, name).load_state_dict(state[name])
        if name.endswith("optimizer"):
            keep_capturable(getattr(agent, name), agent.graphed)
    if agent.update_graphs is not None:
        agent.update_graphs.reset()  # the loaded optimizer state is new tensors
    with torch.no_grad():
        agent.log_temperature.copy_(state["log_temperature"])
    agent.updates = int(state["updates"])
