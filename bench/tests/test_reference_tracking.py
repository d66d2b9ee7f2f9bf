"""The hand-fused tracking reference loop (unilab_bench.reference_tracking) is the same MDP
as the g1_motion_tracking Manager env: from the same state, frames and generator state, its
observations, rewards, terminations and reset state match the env's, step by step. This is
what makes it a fair baseline for the env benchmark."""

from __future__ import annotations

import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets.motion.io import save_clip
from unilab_bench.reference_tracking import copy_env_into, make_tracking_reference

N = 4
TOL = 1e-5


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    return str(save_clip(synthetic_clip(frames=40), tmp_path_factory.mktemp("clips") / "fk_sway.npz"))


def _overrides(clip_file, noise: bool = False) -> dict:
    if noise:  # the task's own noise, pushes and reset noise: equal too, the draws come in the env's order
        return {"commands.motion.clips": [clip_file], "validate_actions": False}
    return {"commands.motion.clips": [clip_file], "events.push": None, "validate_actions": False,
            "observations.policy.enable_corruption": False,
            "events.reset_from_motion.params": {"command_name": "motion"}}


def _pair(make_env, overrides):
    env = make_env(task="g1_motion_tracking", backend="mujoco", num_envs=N, overrides=overrides)
    ref = make_tracking_reference("g1_motion_tracking", backend="mujoco", num_envs=N, overrides=overrides)
    copy_env_into(ref, env)
    return env, ref


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def _compare_step(env, ref, action) -> dict[str, float]:
    obs, reward, terminated, truncated, info = env.step(action)
    r_obs, r_reward, r_term, r_trunc, r_final = ref.step(action)
    assert torch.equal(terminated, r_term) and torch.equal(truncated, r_trunc), (terminated, r_term, truncated,
                                                                                 r_trunc)
    motion = env.command_manager.term("motion")
    assert torch.equal(motion.frame, ref.frame) and torch.equal(motion.clip, ref.clip)
    assert torch.equal(env.episode_length, ref.episode_length)
    diffs = {"reward": _max_diff(reward, r_reward),
             "qpos": _max_diff(env.robot.qpos, ref.backend.views().qpos),
             "qvel": _max_diff(env.robot.qvel, ref.backend.views().qvel)}
    for group in ("policy", "critic"):
        assert obs[group].shape == r_obs[group].shape
        diffs[group] = _max_diff(obs[group], r_obs[group])
        diffs[f"final_{group}"] = _max_diff(info["final_obs"][group], r_final[group])
    return diffs


def test_layout_and_starting_point(make_env, clip_file):
    env, ref = _pair(make_env, _overrides(clip_file))
    assert env.observation_spec == {"policy": 160, "critic": 286}
    assert torch.allclose(ref.weights, env.reward_manager.weights)
    r_obs = ref._observe(ref.ref, ref.critic.clone(), ref.policy_buf.clone())
    assert _max_diff(env.obs["critic"], r_obs["critic"]) < TOL
    assert _max_diff(env.obs["policy"], r_obs["policy"]) < TOL


def test_steps_match_the_manager_env(make_env, clip_file):
    env, ref = _pair(make_env, _overrides(clip_file))
    gen = torch.Generator().manual_seed(3)
    worst: dict[str, float] = {}
    for _ in range(6):
        action = 0.3 * (torch.rand(N, env.action_dim, generator=gen) * 2 - 1)
        for key, value in _compare_step(env, ref, action).items():
            worst[key] = max(worst.get(key, 0.0), value)
    assert max(worst.values()) < TOL, worst


def test_a_forced_reset_matches(make_env, clip_file):
    """Rows 0 and 2 are put one step before their time-out: both loops reset them, drawing
    the same frames; the written state and the new observations agree."""
    env, ref = _pair(make_env, _overrides(clip_file))
    almost = torch.tensor([True, False, True, False])
    env.episode_length[almost] = env.max_episode_length - 1
    ref.episode_length.copy_(env.episode_length)
    zeros = torch.zeros(N, env.action_dim)
    diffs = _compare_step(env, ref, zeros)
    assert max(diffs.values()) < TOL, diffs
    assert (env.episode_length[almost] == 0).all()
    diffs = _compare_step(env, ref, zeros)  # and the step after it
    assert max(diffs.values()) < TOL, diffs


def test_clip_end_and_terminations_match_with_the_tasks_noise(make_env, clip_file):
    """With the task's observation noise, reset noise and pushes on, and a 40-frame clip so
    clip ends (time-outs) come inside the window, the two loops still agree step by step,
    resets included (random actions large enough to end some episodes early too)."""
    env, ref = _pair(make_env, _overrides(clip_file, noise=True))
    gen = torch.Generator().manual_seed(5)
    done = 0
    for _ in range(45):
        action = 2.0 * (torch.rand(N, env.action_dim, generator=gen) * 2 - 1)
        diffs = _compare_step(env, ref, action)
        assert max(diffs.values()) < TOL, diffs
        done += int((env.episode_length == 0).sum())
    assert done > 0


def test_the_reference_step_has_no_host_sync(clip_file):
    from unisim.host_sync import HostSyncProbe

    ref = make_tracking_reference("g1_motion_tracking", num_envs=N, overrides=_overrides(clip_file, noise=True))
    action = torch.zeros(N, ref.nj)
    ref.step(action)
    with HostSyncProbe() as probe, probe.ignoring(ref.backend, "step", "set_state_where"):
        for _ in range(3):
            ref.step(action)
    ref.backend.close()
    assert probe.syncs == [], probe.syncs


def test_env_bench_times_the_reference(clip_file, tmp_path):
    from unilab_bench import env_step

    out = tmp_path / "bench.json"
    record = env_step.main(["--task", "g1_motion_tracking", "--compare-task", "", "--reference", "tracking",
                            "--num-envs", "2", "--steps", "2", "--warmup", "1", "--samples", "3",
                            "--override", f"commands.motion.clips=[\"{clip_file}\"]", "--out", str(out)])
    assert set(record["env_steps_per_s"]) == {"raw", "env_zero", "env_random", "reference"}
    assert record["env_to_reference_ratio"] > 0 and record["reference_to_raw_ratio"] > 0
    ref = record["reference"]["dispatch_per_step"]
    assert ref["host_syncs_per_step"] == 0
    # Both dispatch counts are recorded; written by hand without managers, the loop makes
    # about half the env's Python calls per step (the kernel counts are within a few ops).
    assert ref["kernel_ops_per_step"] > 0 and record["dispatch_per_env_step"]["kernel_ops_per_step"] > 0
    assert 0 < ref["python_calls_per_step"] < record["python_calls_per_env_step"]
