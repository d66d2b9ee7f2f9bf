"""The env benchmark's paired drift control: the raw step and the env step of each pair start
from the same state, the backend's solver warm start included (warp's CPU device, two worlds)."""

from __future__ import annotations

import pytest
import torch
from unilab_bench import env_step as bench

pytest.importorskip("mujoco_warp")


def test_both_steps_of_a_pair_start_from_the_same_state_and_warm_start(monkeypatch):
    from unilab.registry import make_manager_based_rl_env

    env = make_manager_based_rl_env("g1_walk_flat", backend="mjwarp", num_envs=2, device="cpu", seed=0,
                                    overrides=["validate_actions=false"])
    starts: list[tuple[torch.Tensor, torch.Tensor]] = []
    real = bench._time_steps

    def spied(device, steps, fn):
        starts.append((env.backend.views().qpos.clone(), env.backend._warmstart.clone()))
        return real(device, steps, fn)

    try:
        zeros = torch.zeros(2, env.action_dim)
        for _ in range(5):  # the solver carries a warm start from step to step
            env.step(zeros)
        assert env.backend._warmstart.abs().max() > 0
        monkeypatch.setattr(bench, "_time_steps", spied)
        bench._paired_ratio(env, lambda k: zeros, 3)
    finally:
        env.close()
    assert len(starts) == 6
    for pair in range(3):
        (raw_qpos, raw_warm), (env_qpos, env_warm) = starts[2 * pair], starts[2 * pair + 1]
        assert torch.equal(raw_qpos, env_qpos)
        # The env step followed the undo of the raw step, which cleared the warm start: the raw
        # step started warm and the env step cold, unlike work.
        assert torch.equal(raw_warm, env_warm), f"pair {pair}: the raw step and the env step started " \
                                                f"from different solver warm starts"
