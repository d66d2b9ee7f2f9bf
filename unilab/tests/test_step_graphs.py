"""``cuda_graph=true``: the step's manager phases replayed from CUDA graphs.

On the host: the setting is refused where it cannot hold, naming what it needs. On a GPU
(the device machine): the graphed env steps like the eager one from the same seed, through
time-outs, pushes, command resamples and a curriculum stage, and an evaluation hook set
after capture takes effect."""

from __future__ import annotations

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (device machine)")


def test_cuda_graph_is_refused_on_the_host_naming_every_unmet_need(make_env):
    with pytest.raises(ValueError, match=r"cuda_graph=true needs a CUDA device \(the env is on cpu\); a backend with "
                                         r"a device data plane and immediate reset publication \(this one: "
                                         r"host_bridge, immediate\); profile_phases=false"):
        make_env(task="g1_walk_flat", backend="mujoco", num_envs=2,
                 overrides={"cuda_graph": True, "profile_phases": True})
    with pytest.raises(ValueError, match=r"cuda_graph=true needs a CUDA device \(the env is on cpu\)$"):
        make_env(task="g1_walk_flat", backend="mjwarp", num_envs=2, overrides={"cuda_graph": True})


# Every masked path within a few dozen steps: 0.3 s episodes (time-outs and resets), pushes
# every step or two, command resamples every 0.1-0.2 s, the curriculum widening at step 10.
BUSY = {"episode_length_s": 0.3, "events.push.interval_range_s": (0.02, 0.04),
        "commands.twist.resampling_time_range_s": (0.1, 0.2), "validate_actions": False,
        "curriculum.command_ranges.params.stages": [
            {"step": 0, "lin_vel_x": (-1.0, 1.0)}, {"step": 10, "lin_vel_x": (-1.5, 2.0)}]}


@needs_cuda
def test_the_graphed_step_is_the_eager_step(make_env):
    eager = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=64, seed=3, overrides=BUSY)
    graphed = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=64, seed=3,
                       overrides={**BUSY, "cuda_graph": True})
    gen = torch.Generator().manual_seed(0)
    dones = 0
    for k in range(45):  # 3 eager warm-up steps, the capture, then replays
        action = (0.3 * torch.randn(64, eager.action_dim, generator=gen)).cuda()
        a_obs, a_rew, a_term, a_trunc, a_info = eager.step(action)
        b_obs, b_rew, b_term, b_trunc, b_info = graphed.step(action)
        assert torch.equal(a_term, b_term) and torch.equal(a_trunc, b_trunc), k
        torch.testing.assert_close(b_rew, a_rew, atol=1e-4, rtol=1e-4)
        for group in a_obs:
            torch.testing.assert_close(b_obs[group], a_obs[group], atol=1e-3, rtol=1e-3)
            torch.testing.assert_close(b_info["final_obs"][group], a_info["final_obs"][group], atol=1e-3, rtol=1e-3)
        dones += int((a_term | a_trunc).sum())
    assert graphed.step_graphs.graphs is not None  # it replayed
    assert dones > 64  # every row reset at least once
    assert eager.flush_metrics().keys() == graphed.flush_metrics().keys()
    # A returned tensor is the caller's: the next replay does not overwrite it.
    kept = b_obs["policy"].clone()
    graphed.step(torch.zeros(64, graphed.action_dim, device="cuda"))
    assert torch.equal(b_obs["policy"], kept)


@needs_cuda
def test_an_evaluation_hook_after_capture_takes_effect(make_env):
    env = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=8,
                   overrides={**BUSY, "cuda_graph": True})
    zero = torch.zeros(8, env.action_dim, device="cuda")
    for _ in range(6):
        env.step(zero)
    assert env.step_graphs.graphs is not None
    term = env.command_manager.term("twist")
    held = torch.tensor([[0.5, 0.0, 0.0]], device="cuda").expand(8, 3)
    term.hold(held)  # the graphs are captured again with the held command
    for _ in range(12):  # past several resample times and time-outs
        env.step(zero)
        torch.testing.assert_close(term.command, held)
    term.hold(None)
