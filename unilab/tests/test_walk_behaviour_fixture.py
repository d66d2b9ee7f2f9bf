"""g1_walk_flat computes what it computed before the runtime became task-agnostic.

The fixture holds 50 steps of g1_walk_flat on mujoco (4 envs, seed 3, pushes every
0.1-0.3 s, small random actions then large ones so that some episodes end and reset):
observations, final observations, rewards and their weighted components, terminations and
the state. It was recorded with the code of commit 3761494, where the velocity command,
the metrics and the foot timers were built into the managers, running exactly the
protocol of ``_rollout`` below, plus one adjustment: that code skipped the second reset
of the foot timers after ``env.reset()`` (it reset shared state once per mask object), so
the recording zeroed them as the reset asked.

The recording read foot contact from the ankle height, which is now the named variant
``g1_walk_flat_height_proxy`` (g1_walk_flat itself reads contact forces), so the variant replays it.

No command timer expires in these 50 steps (periods are 3-8 s), so moving rewards before
the command update does not enter; ``test_step_order`` pins that order separately.
"""

from __future__ import annotations

from pathlib import Path

import torch

import unilab

FIXTURE = Path(__file__).parent / "fixtures" / "g1_walk_flat_steps_before_task_agnostic_runtime.pt"


def _rollout() -> dict[str, torch.Tensor]:
    env = unilab.make_manager_based_rl_env("g1_walk_flat_height_proxy", backend="mujoco", num_envs=4, seed=3,
                                           overrides=["events.push.interval_range_s=[0.1,0.3]"])
    try:
        env.reset()
        gen = torch.Generator().manual_seed(11)
        rec: dict[str, list[torch.Tensor]] = {k: [] for k in (
            "policy", "critic", "final_policy", "final_critic", "reward", "components", "terminated",
            "truncated", "qpos")}
        for k in range(50):
            action = (torch.rand(4, env.action_dim, generator=gen) * 2 - 1) * (0.3 if k < 10 else 3.0)
            obs, reward, terminated, truncated, info = env.step(action)
            rec["policy"].append(obs["policy"].clone())
            rec["critic"].append(obs["critic"].clone())
            rec["final_policy"].append(info["final_obs"]["policy"].clone())
            rec["final_critic"].append(info["final_obs"]["critic"].clone())
            rec["reward"].append(reward.clone())
            rec["components"].append(env.reward_manager.last_components.clone())
            rec["terminated"].append(terminated.clone())
            rec["truncated"].append(truncated.clone())
            rec["qpos"].append(env.robot.qpos.clone())
        return {k: torch.stack(v) for k, v in rec.items()}
    finally:
        env.close()


def test_g1_walk_flat_steps_match_the_recording_from_before_the_change():
    before = torch.load(FIXTURE)
    after = _rollout()
    assert int((before["terminated"] | before["truncated"]).sum()) >= 2  # resets are covered
    for key, expected in before.items():
        got = after[key]
        assert got.shape == expected.shape, key
        if expected.dtype == torch.bool:
            assert torch.equal(got, expected), key
        else:  # same ops in the same order: equal up to float reassociation
            assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5), (key, (got - expected).abs().max())
