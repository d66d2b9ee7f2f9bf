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
