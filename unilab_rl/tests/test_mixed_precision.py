"""The bf16 autocast path runs on CUDA only; exercising it with CPU autocast catches dtype
mismatches (scatter, gather, BatchNorm statistics) before a GPU run does."""

import pytest
import torch
import unilab_rl.fastsac
import unilab_rl.flashsac
from helpers import tiny_agent
from unilab_rl.runner import OffPolicyRunner, RunIdentity, RunnerConfig


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


def _outputs_and_grads(net, inputs):
    net.zero_grad()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        out = net(*inputs)
    out.float().square().sum().backward()
    return [out.detach().clone()] + [p.grad.clone() for p in net.parameters() if p.grad is not None]


def _flash_block():
    from unilab_rl.networks.flash import InvertedResidualBlock
    torch.manual_seed(0)
    net = InvertedResidualBlock(ensemble=2, width=24)
    return net, (torch.randn(2, 64, 24),), net.contract


def _fastsac_critic():
    from unilab_rl.networks.mlp import CategoricalCriticEnsemble
    torch.manual_seed(0)
    net = CategoricalCriticEnsemble(obs_dim=13, action_dim=5, width=64, ensemble=2, atoms=11)
    return net, (torch.randn(32, 13), torch.randn(32, 5)), None


@pytest.mark.parametrize("build", [_flash_block, _fastsac_critic], ids=["flash-block", "fastsac-critic"])
def test_hidden_activations_reach_the_next_matmul_in_bf16_with_identical_math(monkeypatch, build):
    """Under bf16 autocast the wide hidden activations are handed on in bf16 (fewer bytes between
    kernels) and outputs and gradients equal, bit for bit, those of handing them on in float32."""
    net, inputs, contract = build()
    seen = []
    if contract is not None:
        contract.register_forward_pre_hook(lambda module, args: seen.append(args[0].dtype))
    else:
        real_baddbmm = torch.baddbmm
        monkeypatch.setattr(torch, "baddbmm", lambda b, x, w: (seen.append(x.dtype), real_baddbmm(b, x, w))[1])
    cast = _outputs_and_grads(net, inputs)
    assert seen and set(seen) == {torch.bfloat16}
    import unilab_rl.networks.flash as flash
    import unilab_rl.networks.mlp as mlp
    monkeypatch.setattr(mlp, "as_gemm_input", lambda t: t)
    monkeypatch.setattr(flash, "as_gemm_input", lambda t: t)
    uncast = _outputs_and_grads(net, inputs)
    assert len(cast) == len(uncast) > 1
    for a, b in zip(cast, uncast):
        assert a.dtype == b.dtype and torch.equal(a, b)
