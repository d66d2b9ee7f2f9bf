"""Small pieces every learner shares: mixed precision, optimizer steps with a gradient hook,
target-network averaging, checkpoint state."""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator, Sequence

import torch
from torch import nn
from torch.optim.swa_utils import get_ema_multi_avg_fn

from unilab_rl.contract import ReplayBatch
from unilab_rl.graphed_updates import CudaGraphUpdates, keep_capturable
from unilab_rl.symmetry import mirrored_batch

# Called with the parameters of one optimizer after backward and before the step; a
# data-parallel wrapper installs an all-reduce here (unilab_rl.distributed).
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
    (BatchNorm running statistics follow the same average). torch's multi-tensor EMA: on a
    GPU a few kernels for the whole network instead of one per tensor, every update."""
    targets, sources = list(_float_state(target)), list(_float_state(source))
    if len(targets) != len(sources):
        raise ValueError(f"polyak_update: target has {len(targets)} float tensors, source {len(sources)}")
    if targets:
        get_ema_multi_avg_fn(decay=1.0 - tau)(targets, sources, None)


def averaged_policy(actor: nn.Module, tau: float) -> nn.Module | None:
    """With ``tau`` > 0, a Polyak average of ``actor`` (``sac_update_step`` moves it by ``tau``
    toward the actor at every actor update) that acts whenever the policy acts
    deterministically: evaluation, play, export. Why: the deterministic mean of the latest
    actor is not what SAC optimizes, and it can swing between neighbouring updates (two
    checkpoints 64 updates apart walked 16 and 12 of 17 sweep commands); an average over the
    last ~1/tau actor updates is steadier. None with ``tau`` 0: the latest actor acts."""
    return target_network(actor) if tau > 0 else None


def deterministic_actor(agent) -> nn.Module:
    """The actor a deterministic action comes from: the averaged one when the agent keeps it."""
    return agent.averaged_actor if agent.averaged_actor is not None else agent.actor


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


TEMPERATURE_METRICS = ("actor/entropy", "actor/temperature", "actor/temperature_loss")  # temperature_step's


def temperature_step(log_temperature: nn.Parameter, optimizer: torch.optim.Optimizer, log_prob: torch.Tensor,
                     target_entropy: float, gradient_hook: GradientHook | None) -> dict[str, torch.Tensor]:
    """SAC's learned temperature: move the policy's entropy toward ``target_entropy``."""
    entropy = -log_prob.detach().float().mean()
    loss = log_temperature.exp() * (entropy - target_entropy)
    optimizer_step(optimizer, loss, gradient_hook)
    return dict(zip(TEMPERATURE_METRICS, (entropy, log_temperature.detach().exp(), loss.detach()), strict=True))


def sac_update_step(agent, with_actor: bool, batch: ReplayBatch) -> dict[str, torch.Tensor]:
    """One SAC learner update, the unit a CUDA graph captures: with symmetry augmentation the
    batch gains its mirrored copy (inside the graph, so a replay copies in only the sampled
    half), then the critic, then (``with_actor``) the actor and temperature and the averaged
    policy's Polyak step, then the target critic's."""
    if agent.mirrors is not None:
        batch = mirrored_batch(batch, agent.mirrors)
    metrics = agent.update_critic(batch)
    if with_actor:
        metrics.update(agent.update_actor_and_temperature(batch))
        if agent.averaged_actor is not None:
            polyak_update(agent.averaged_actor, agent.actor, agent.config.averaged_policy_tau)
    polyak_update(agent.target_critic, agent.critic, agent.config.target_tau)
    return metrics


def sac_update_graphs(agent, enabled: bool) -> CudaGraphUpdates | None:
    """The agent's CUDA graphs of ``sac_update_step`` (None when not ``enabled``); its
    optimizers must have been built with ``capturable=enabled``."""
    if not enabled:
        return None
    return CudaGraphUpdates(functools.partial(sac_update_step, agent), lambda: agent.gradient_hook)


def drop_update_graphs(agent) -> None:
    """Free the agent's captured CUDA graphs. A data-parallel rank must do this before it
    destroys its process group: with graphs holding captured NCCL all-reduces still alive,
    ``destroy_process_group`` never returned (seen on 2 H200s)."""
    if agent.update_graphs is not None:
        agent.update_graphs.reset()


def scheduled_sac_update(agent, batch: ReplayBatch, actor_period: int) -> dict[str, torch.Tensor]:
    """A SAC learner's ``update(batch)``: critic every call, actor and temperature every
    ``actor_period`` calls, replayed from the agent's CUDA graphs when it has them. Returns
    detached on-device scalars."""
    with_actor = agent.updates % actor_period == 0
    if agent.update_graphs is not None:
        metrics = agent.update_graphs(with_actor, batch)
    else:
        metrics = sac_update_step(agent, with_actor, batch)
    agent.updates += 1
    return metrics


# What every SAC learner checkpoints; each algorithm adds its own normalizers and noise state.
_SAC_MODULES = ("actor", "critic", "target_critic", "actor_optimizer", "critic_optimizer", "temperature_optimizer")


def sac_state_dict(agent) -> dict:
    state = {name: getattr(agent, name).state_dict() for name in _SAC_MODULES}
    state["log_temperature"] = agent.log_temperature.detach().clone()
    state["updates"] = agent.updates
    if agent.averaged_actor is not None:
        state["averaged_actor"] = agent.averaged_actor.state_dict()
    return state


def load_sac_state_dict(agent, state: dict) -> None:
    for name in _SAC_MODULES:
        getattr(agent, name).load_state_dict(state[name])
        if name.endswith("optimizer"):
            keep_capturable(getattr(agent, name), agent.update_graphs is not None)
            _use_configured_learning_rate(getattr(agent, name), agent.config.learning_rate)
    if agent.update_graphs is not None:
        agent.update_graphs.reset()  # the loaded optimizer state is new tensors
    with torch.no_grad():
        agent.log_temperature.copy_(state["log_temperature"])
    agent.updates = int(state["updates"])
    if agent.averaged_actor is not None:
        if "averaged_actor" in state:
            agent.averaged_actor.load_state_dict(state["averaged_actor"])
        else:  # a run that kept no average (``averaged_policy_tau`` was 0) starts it at its actor
            polyak_update(agent.averaged_actor, agent.actor, 1.0)


def _use_configured_learning_rate(optimizer: torch.optim.Optimizer, learning_rate: float) -> None:
    """An optimizer's loaded state carries the learning rate it was saved with; the config
    this learner was built from wins (a resume that changes ``learning_rate`` takes effect,
    and the checkpoint it writes records the rate it trained with)."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], torch.Tensor):
            group["lr"].fill_(learning_rate)
        else:
            group["lr"] = learning_rate
