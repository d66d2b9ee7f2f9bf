"""Device resolution (unisim.devices) on CPU, with the GPU count injected, and through adapters."""

from __future__ import annotations

import pytest
import torch
import unisim
from unisim import ContractViolation, resolve_device


@pytest.mark.parametrize("count, available, want", [(0, False, "cpu"), (1, True, "cuda:0")])
def test_default_uses_the_only_device_there_is(count, available, want):
    assert resolve_device(None, cuda_count=count, cuda_available=available) == torch.device(want)


def test_default_with_several_gpus_fails_closed_naming_the_choices():
    with pytest.raises(ContractViolation, match="device") as info:
        resolve_device(None, cuda_count=3, cuda_available=True)
    for choice in ("cuda:0", "cuda:1", "cuda:2"):
        assert choice in str(info.value)


@pytest.mark.parametrize("device, want", [("cuda:1", "cuda:1"), ("cuda", "cuda:0"), ("cpu", "cpu"),
                                          (torch.device("cuda", 2), "cuda:2")])
def test_an_explicit_device_always_wins(device, want):
    assert resolve_device(device, cuda_count=3, cuda_available=True) == torch.device(want)


@pytest.mark.parametrize("device", ["cpu:0", "cpu:1", torch.device("cpu", 0)])
def test_a_host_device_with_an_index_is_the_host(device):
    # torch makes tensors asked for on cpu:0 on cpu; a backend keeping the index refused them.
    assert str(resolve_device(device, cuda_count=0, cuda_available=False)) == "cpu"


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_requested_without_cuda_is_an_error_not_a_cpu_fallback(device):
    with pytest.raises(ContractViolation, match="not available"):
        resolve_device(device, cuda_count=0, cuda_available=False)


def test_a_gpu_that_does_not_exist_is_named():
    with pytest.raises(ContractViolation, match="does not exist"):
        resolve_device("cuda:4", cuda_count=2, cuda_available=True)


@pytest.mark.parametrize("device", ["tpu", "gpu0", "mps", 3.5])
def test_a_device_that_is_not_cpu_or_cuda_is_refused(device):
    with pytest.raises(ContractViolation, match="device"):
        resolve_device(device, cuda_count=1, cuda_available=True)


# The GPU-capable adapters resolve before touching their engine: no engine import, no build.
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error path")
@pytest.mark.parametrize("backend", ["mjwarp", "genesis"])
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_adapters_refuse_cuda_where_there_is_none(builtin_model, backend, device):
    with pytest.raises(ContractViolation, match="not available"):
        unisim.create_backend(backend, model=builtin_model, num_envs=1, device=device)


@pytest.mark.parametrize("backend", ["mjwarp", "genesis"])
def test_adapters_refuse_a_device_that_does_not_exist(builtin_model, backend):
    with pytest.raises(ContractViolation, match="device"):
        unisim.create_backend(backend, model=builtin_model, num_envs=1, device="cuda:64")
    with pytest.raises(ContractViolation, match="device"):
        unisim.create_backend(backend, model=builtin_model, num_envs=1, device="xpu:0")
