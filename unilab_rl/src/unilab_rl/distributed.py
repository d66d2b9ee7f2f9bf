"""Data-parallel training over torch.distributed (torchrun; NCCL on GPUs, gloo on CPU).

Each rank runs its own envs, replay and collector; the learners stay identical because they
start from rank 0's state and every optimizer step applies the rank-averaged gradient. Three
hooks wire this into an unchanged runner and learner:
- ``agent.gradient_hook = average_gradients`` (one flattened all-reduce per optimizer step);
- ``runner.stop_consensus``: every rank stops on the same iteration (a time budget or a Ctrl-C
  seen by one rank would otherwise leave the others blocked in an all-reduce);
- the learner state is broadcast from rank 0 once, before training.
Logging and checkpoints are rank 0's job (the CLI gives other ranks no run directory).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from unilab_rl.contract import OffPolicyAgent


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def rank_from_environment() -> RankInfo | None:
    """The torchrun rank of this process, or None for a plain single-process run."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return None
    return RankInfo(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))


def start(rank: RankInfo, device: torch.device) -> None:
    # Some torch.distributed modules take ``group.WORLD`` as a default argument when they are
    # imported; dynamo imports them, and building any torch.optim optimizer imports dynamo
    # (a learner does, even uncompiled). Imported after the group exists, they
    # keep it alive past destroy_process_group, so its gloo threads run on into interpreter
    # exit (a CI run saw a rank abort at its end with them alive: "terminate called without
    # an active exception"). Imported first, they take None and ``stop`` frees the group.
    import torch._dynamo  # noqa: F401

    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank.rank, world_size=rank.world_size)


def finish_together() -> None:
    """Call after a normal end of training, before teardown. A rank that closes its
    connections while a peer still holds them open can make the peer's gloo I/O thread
    throw and abort the process (seen on a loaded 2-core CI box: rank 1 SIGABRT after rank 0
    finished). Not on an error path: a peer stuck in another collective would never match
    the barrier, whereas a rank that exits with an error lets torchrun stop the others."""
    if dist.is_initialized():
        dist.barrier()


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def average_gradients(params: Sequence[nn.Parameter]) -> None:
    """Replace each gradient by its mean over ranks (a GradientHook)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for grad in grads:
        grad.copy_(flat[offset: offset + grad.numel()].view_as(grad))
        offset += grad.numel()


# Reading the agreed flag back waits for every kernel queued before it, which would stall
# the collector's CPU/GPU overlap once per env step; every 10th step bounds a Ctrl-C's or a
# time budget's extra run to 10 env steps (~0.2 s at 4096 envs per H200).
STOP_CHECK_EVERY = 10


def stop_consensus(device: torch.device, every: int = STOP_CHECK_EVERY) -> Callable[[bool], bool]:
    """A runner stop hook: stop when any rank wants to. Every rank calls it once per
    iteration; each ``every``-th call all-reduces (MAX) the flags, the others answer False."""
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    calls = 0

    def any_rank_stops(local_stop: bool) -> bool:
        nonlocal calls
        calls += 1
        if calls % every:
            return False
        flag = torch.tensor([1.0 if local_stop else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    return any_rank_stops


def synchronize_learner(agent: OffPolicyAgent, rank: RankInfo) -> None:
    """Give every rank rank 0's learner state (weights, optimizers, normalizers)."""
    # Sent through the CPU: unpickled CUDA tensors would land on rank 0's GPU index.
    state = [_on_cpu(agent.state_dict()) if rank.is_main else None]
    dist.broadcast_object_list(state, src=0)
    if not rank.is_main:
        agent.load_state_dict(state[0])


def _on_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: _on_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_on_cpu(item) for item in value)
    return value
