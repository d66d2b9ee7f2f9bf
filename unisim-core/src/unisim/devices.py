"""Device resolution shared by the GPU-capable adapters."""

from __future__ import annotations

import torch

from unisim.errors import ContractViolation


def resolve_device(device: str | torch.device | None, *, cuda_count: int | None = None,
                   cuda_available: bool | None = None) -> torch.device:
    """Pick the device an adapter runs on.

    An explicit device always wins (and must exist). With ``None``: one visible GPU is used
    without CUDA_VISIBLE_DEVICES; several visible GPUs fail closed naming the choices; no
    GPU means cpu. ``cuda_count``/``cuda_available`` exist so the logic is testable on CPU.
    """
    count = torch.cuda.device_count() if cuda_count is None else cuda_count
    available = torch.cuda.is_available() if cuda_available is None else cuda_available
    if device is None:
        if not available or count == 0:
            return torch.device("cpu")
        if count == 1:
            return torch.device("cuda:0")
        choices = [f"cuda:{i}" for i in range(count)]
        raise ContractViolation(
            f"device: {count} GPUs are visible and none was chosen; pass device= one of {choices} "
            "(or 'cpu'), or launch one process per GPU with torchrun")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ContractViolation(f"device: expected 'cpu', 'cuda' or 'cuda:<i>', got {device!r}") from exc
    if dev.type == "cuda":
        if not available or count == 0:
            raise ContractViolation(f"device: {device!r} requested but CUDA is not available here")
        index = 0 if dev.index is None else dev.index
        if index >= count:
            raise ContractViolation(f"device: {device!r} does not exist; {count} GPU(s) visible")
        return torch.device("cuda", index)
    if dev.type != "cpu":
        raise ContractViolation(f"device: expected 'cpu' or 'cuda[:i]', got {device!r}")
    # One host device: torch puts tensors asked for on "cpu:0" on "cpu", and a backend that
    # kept the index would refuse its own env's tensors (cpu:0 != cpu).
    return torch.device("cpu")
