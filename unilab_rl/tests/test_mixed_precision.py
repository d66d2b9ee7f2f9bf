"""The bf16 autocast path runs on CUDA only; exercising it with CPU autocast catches dtype
mismatches (scatter, gather, BatchNorm statistics) before a GPU run does."""

import pytest
import torch
import unilab_rl.fastsac
import unilab_rl.flashsac
import unilab_rl.networks.flash as flash
from helpers import tiny_agent
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig


@pytest.mark.parametrize("module", [unilab_rl.flashsac, unilab_rl.fastsac], ids=["flashsac", "fastsac"])
def test_update_under_bf16_autocast_gives_finite_float32_metrics(monkeypatch, module):
    monkeypatch.setattr(module, "autocast_context",
                        lambda device, enabled: torch.autocast(device_type="cpu", dtype=torch.bfloat16))
    algo = module.__name__.rsplit(".", 1)[-1]
    env, config, agent = tiny_agent(algo)
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", algo, 0), None,
                             runner_config=RunnerConfig(log_every=100))
    runner.train(max_env_steps=12 * env.num_envs)
    metrics = agent.update(runner.replay.sample(32))
    metrics = agent.update(runner.replay.sample(32))
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in metrics.values())
    assert all(p.dtype == torch.float32 for p in agent.actor.parameters())


def _block_outputs_and_grads(block, x):
    block.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = block(x)
    out.float().square().sum().backward()
    return [out.detach().clone()] + [p.grad.clone() for p in block.parameters()]


def test_flash_block_hands_its_wide_activation_on_in_bf16_with_identical_math(monkeypatch):
    """Under bf16 autocast the 4x-wide BatchNorm output reaches the contracting matmul in bf16
    (fewer bytes between kernels), and outputs and gradients equal, bit for bit, those of
    handing it on in float32."""
    torch.manual_seed(0)
    block = flash.InvertedResidualBlock(ensemble=2, width=24)
    x = torch.randn(2, 64, 24)
    seen = []
    block.contract.register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    cast = _block_outputs_and_grads(block, x)
    assert seen == [torch.bfloat16]
    monkeypatch.setattr(flash, "as_gemm_input", lambda t: t)
    uncast = _block_outputs_and_grads(block, x)
    assert seen[-1] == torch.float32
    assert len(cast) == len(uncast) == 1 + len(list(block.parameters()))
    for a, b in zip(cast, uncast):
        assert a.dtype == b.dtype and torch.equal(a, b)
