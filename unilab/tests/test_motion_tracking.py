"""g1_motion_tracking: on the start frame after a reset (the target one frame on), its
observation layout, clip ends, adaptive start sampling, and a sync-free step. The reference clip is made here by forward
kinematics of the project's G1 (tests/fk_clip.py), so these tests need no downloaded data."""

from __future__ import annotations

import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets.motion.io import save_clip
from unilab.managers.event import StateTransaction
from unilab.tasks.tracking.mdp.sampling import StartSampler
from unisim.host_sync import HostSyncProbe

from unilab import math as lm

N = 4


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    return str(save_clip(synthetic_clip(frames=150), tmp_path_factory.mktemp("clips") / "fk_sway.npz"))


def _overrides(clip_file, **extra):
    return {"commands.motion.clips": [clip_file], "events.push": None, "validate_actions": False,
            "events.reset_from_motion.params": {"command_name": "motion"}, **extra}  # no reset noise


def _state_frame_errors(motion):
    """The robot against its command's state frame: body positions (m), orientations (rad)."""
    pos, quat = motion.state_frame("body_pos", "body_quat")
    pos, quat = pos.view(motion.robot_body_pos_w.shape), quat.view(motion.robot_body_quat_w.shape)
    return (torch.linalg.vector_norm(motion.robot_body_pos_w - pos, dim=-1).max().item(),
            lm.quat_error_magnitude(motion.robot_body_quat_w, quat).max().item())


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp", pytest.param("genesis", marks=pytest.mark.slow)])
def test_right_after_a_reset_the_robot_is_on_its_start_frame_and_the_target_is_the_next(make_env, clip_file,
                                                                                        backend):
    env = make_env(task="g1_motion_tracking", backend=backend, num_envs=N, overrides=_overrides(clip_file))
    motion = env.command_manager.term("motion")
    assert motion.frame.min() >= 1 and motion.frame.max() <= 149
    pos_err, rot_err = _state_frame_errors(motion)
    assert pos_err < 1e-3 and rot_err < 1e-3, (pos_err, rot_err)
    (start_joints,) = motion.state_frame("joint_pos")
    assert torch.allclose(env.robot.joint_pos, start_joints, atol=1e-5)
    # What the policy observes is the frame after: the one its action is to reach.
    clip = synthetic_clip(frames=150)
    assert torch.allclose(motion.ref_joint_pos.cpu(), clip.joint_pos[motion.frame.cpu()].float(), atol=1e-6)
    assert torch.allclose(start_joints.cpu(), clip.joint_pos[motion.frame.cpu() - 1].float(), atol=1e-6)
    target_err = torch.linalg.vector_norm(motion.robot_body_pos_w - motion.ref_body_pos_w, dim=-1).max().item()
    assert target_err > 5e-3  # the sway clip moves between frames: the target is not where the robot is


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_on_a_pinned_real_clip_too_the_reset_robot_is_on_its_start_frame(make_env, backend):
    env = make_env(task="g1_motion_tracking", backend=backend, num_envs=N, overrides={
        "events.push": None, "events.reset_from_motion.params": {"command_name": "motion"}})
    motion = env.command_manager.term("motion")
    assert motion.library.names == ["walk_forward_loop_002__A022"]
    pos_err, rot_err = _state_frame_errors(motion)
    assert pos_err < 1e-3 and rot_err < 1e-3, (pos_err, rot_err)


def test_observation_layout_is_beyondmimics(make_env, clip_file):
    env = make_env(task="g1_motion_tracking", num_envs=N, overrides=_overrides(clip_file))
    assert env.observation_spec == {"policy": 160, "critic": 286}
    blind = make_env(task="g1_motion_tracking_no_state_estimation", num_envs=N, overrides=_overrides(clip_file))
    assert blind.observation_spec == {"policy": 154, "critic": 286}
    assert {"metrics/motion/error_body_pos", "metrics/motion/sampling_entropy", "reward/body_pos",
            "termination/clip_end"} <= set(env.metric_names)


def test_a_clip_end_is_a_time_out_and_the_reference_advances_one_frame_per_step(make_env, clip_file):
    env = make_env(task="g1_motion_tracking", num_envs=N, overrides=_overrides(
        clip_file, **{"commands.motion.sampling": "start", "terminations.tracking.params.anchor_height": 10.0,
                      "terminations.tracking.params.anchor_ori": 10.0,
                      "terminations.tracking.params.end_effector_height": 10.0, "episode_length_s": 100.0}))
    motion = env.command_manager.term("motion")
    assert motion.frame.tolist() == [1] * N  # written at frame 0, aiming at frame 1
    hold = torch.zeros(N, env.action_dim)
    for k in range(148):  # states at frames 1 .. 148
        _, _, terminated, truncated, _ = env.step(hold)
        assert not (terminated | truncated).any(), k
        assert motion.frame.tolist() == [k + 2] * N
    _, _, terminated, truncated, _ = env.step(hold)  # the state reached the last frame, 149
    assert truncated.all() and not terminated.any()
    assert motion.frame.tolist() == [1] * N  # new episodes from the start
    assert env.flush_metrics()["termination/clip_end"] == N


def _sampler(mode="adaptive", lengths=(301,), alpha=0.5):
    return StartSampler(list(lengths), [1.0] * len(lengths), 50, mode, uniform_ratio=0.1, alpha=alpha,
                        kernel_size=1, decay=0.8, device=torch.device("cpu"))


def test_adaptive_sampling_concentrates_on_bins_that_fail_and_is_uniform_without_failures():
    sampler = _sampler()
    assert sampler.num_bins == 6
    assert torch.allclose(sampler.probabilities, torch.full((6,), 1 / 6))
    clip = torch.zeros(64, dtype=torch.int64)
    frame = torch.full((64,), 210)  # bin 4
    for _ in range(20):
        sampler.record(clip, frame, torch.ones(64, dtype=torch.bool))
    p = sampler.probabilities
    assert p.argmax().item() == 4 and p[4] > 0.9
    _, frames = sampler.sample(4000, torch.Generator().manual_seed(0))
    assert ((frames >= 200) & (frames < 250)).float().mean() > 0.85
    entropy, top = sampler.entropy_and_top()
    assert entropy < 0.5 and top == p.max()


def test_without_failures_adaptive_starts_are_uniform_over_frames_short_last_bin_included():
    # 455 frames: 454 usable starts, nine bins of 50 and one of 4. The floor was the same per
    # bin, so the 4-frame bin drew a tenth of the starts, where uniform over frames gives it 1%.
    sampler = _sampler(lengths=(455,))
    assert sampler.num_bins == 10 and sampler.bin_size[-1].item() == 4
    torch.testing.assert_close(sampler.probabilities, sampler.bin_size.float() / 454)
    _, frames = sampler.sample(20000, torch.Generator().manual_seed(0))
    assert (frames >= 450).float().mean() < 0.02


def test_uniform_and_start_modes_and_the_same_seed_gives_the_same_starts():
    uniform = _sampler("uniform", lengths=(101, 51))
    clip, frame = uniform.sample(20000, torch.Generator().manual_seed(1))
    assert 0.45 < (clip == 0).float().mean() < 0.55  # equal clip weights
    assert frame[clip == 0].max() <= 99 and frame[clip == 1].max() <= 49  # one step before the last frame
    a = uniform.sample(100, torch.Generator().manual_seed(7))
    b = uniform.sample(100, torch.Generator().manual_seed(7))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    _, start = _sampler("start").sample(50, torch.Generator().manual_seed(0))
    assert start.eq(0).all()


def test_a_tracking_step_with_resets_makes_no_host_sync_on_mjwarp(make_env, clip_file):
    env = make_env(task="g1_motion_tracking", backend="mjwarp", num_envs=N, overrides={
        "commands.motion.clips": [clip_file], "validate_actions": False})
    env.step(torch.zeros(N, env.action_dim))
    with HostSyncProbe() as probe:
        for _ in range(3):
            env.step(torch.ones(N, env.action_dim))  # falls and resets along the way
    assert probe.syncs == []
    assert probe.op_count > 100


def test_the_evaluation_plays_each_clip_from_its_start_and_reports_per_clip(make_env, clip_file, tmp_path):
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    second = str(save_clip(synthetic_clip(frames=60, name="fk_short"), tmp_path / "fk_short.npz"))
    overrides = {"commands.motion.clips": [clip_file, second]}
    evaluation = task_evaluation("g1_motion_tracking", {"envs_per_clip": 2})
    assert evaluation.num_envs() == 2  # the task's own library: one clip
    evaluation = evaluation.fitted(task_config(evaluation.task, overrides))  # the run's library: two
    env = make_env(task=evaluation.task, num_envs=evaluation.num_envs(), overrides=overrides)
    motion = env.command_manager.term("motion")
    frames = []
    policy = lambda obs: frames.append(motion.frame.clone()) or torch.zeros(env.num_envs, env.action_dim)
    report = evaluation.run(env, policy)
    assert frames[0].tolist() == [1, 1, 1, 1]  # every clip from its first frame, aiming at its second
    assert [c["clip"] for c in report["cases"]] == ["fk_sway", "fk_short"]
    for case in report["cases"]:  # a zero policy falls off the reference within its first second
        assert case["success_rate"] == 0.0 and not case["passed"]
        assert 10.0 < case["mpkpe_mm"] < 1000.0 and 0.0 < case["root_relative_mpkpe_mm"] < 1000.0
        # Per body and step |error| <= |root-relative error| + |root error|; the means keep it.
        assert 0.0 < case["root_error_mm"] and case["mpkpe_mm"] <= case["root_relative_mpkpe_mm"] + case[
            "root_error_mm"] + 1e-3
    # The same fall (both clips share their first frames) in the first quarter of the 148 scored
    # steps of fk_sway, and across three quarters of the 58 of fk_short, its error growing as it falls.
    sway, short = (c["mpkpe_mm_by_quarter"] for c in report["cases"])
    assert sway[1:] == [None, None, None] and sway[0] == pytest.approx(report["cases"][0]["mpkpe_mm"], rel=1e-5)
    assert short[3] is None and short[0] < short[1] < short[2]
    assert report["passed"] is (all(c["passed"] for c in report["cases"]))
    assert motion.assigned is None  # released: training samples again


def test_the_walk_run_variant_tracks_every_pinned_walk_and_run_clip_and_is_judged_per_clip(make_env):
    from unilab.assets.motion import PINNED_CLIP_GROUPS
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    walk_run = sorted(n for n, group in PINNED_CLIP_GROUPS.items() if group == "WalkandRun")
    assert len(walk_run) == 17 and "fallAndGetUp1_subject1" not in walk_run
    assert list(task_config("g1_motion_tracking_walk_run").commands["motion"].clips) == walk_run
    evaluation = task_evaluation("g1_motion_tracking_walk_run", {"envs_per_clip": 1})
    assert evaluation.task == "g1_motion_tracking_walk_run_play" and evaluation.num_envs() == 17
    env = make_env(task=evaluation.task, num_envs=evaluation.num_envs())
    motion = env.command_manager.term("motion")
    assert motion.library.num_clips == 17 and env.cfg.commands["motion"].sampling == "start"
    report = evaluation.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
    assert [c["clip"] for c in report["cases"]] == walk_run
    # A zero policy falls on every clip: each case is judged on its own.
    assert all(c["success_rate"] == 0.0 and not c["passed"] for c in report["cases"])
    assert not report["passed"]


def test_the_reset_event_writes_every_column_of_every_row_so_the_env_skips_the_default_refill(make_env, clip_file):
    env = make_env(task="g1_motion_tracking", num_envs=N, overrides=_overrides(clip_file))
    assert env.event_manager.fills_reset_state
    nq, nv = env.default_qpos.shape[0], env.default_qvel.shape[0]
    nan = float("nan")
    txn = StateTransaction(torch.ones(N, dtype=torch.bool), torch.zeros(N, dtype=torch.bool),
                           torch.full((N, nq), nan), torch.full((N, nv), nan), env.robot.qvel.clone())
    env.event_manager.apply(env, txn)
    assert torch.isfinite(txn.reset_qpos).all() and torch.isfinite(txn.reset_qvel).all()
    # Walking's reset events write parts of the state over the default pose: it keeps the refill.
    assert not make_env(task="g1_walk_flat", num_envs=N).event_manager.fills_reset_state


def test_a_reset_outside_a_step_records_no_failure_in_the_adaptive_sampler(make_env, clip_file):
    # env.reset() cuts episodes without logging them; the last step's terminations (already
    # recorded by that step) must not be recorded again, at the new episodes' start frames.
    env = make_env(task="g1_motion_tracking", num_envs=N, overrides=_overrides(
        clip_file, **{"commands.motion.sampling": "adaptive", "terminations.tracking.params.anchor_height": 1e-6}))
    sampler = env.command_manager.term("motion").sampler
    _, _, terminated, _, _ = env.step(torch.zeros(N, env.action_dim))
    assert terminated.all()
    recorded = sampler.failed.clone()
    assert recorded.sum() > 0
    env.reset()
    torch.testing.assert_close(sampler.failed, recorded * (1.0 - sampler.alpha))  # a decay, no failure added
    assert terminated.all()  # the tensor that step returned is as the caller got it


def test_a_clip_too_short_to_score_a_step_is_refused_not_passed_at_zero_error(make_env, clip_file, tmp_path):
    # A 2-frame clip's only step ends its episode: nothing was scored, and it passed at 0.0 mm.
    from unilab.evaluation import task_evaluation
    from unilab.registry import task_config

    short = str(save_clip(synthetic_clip(frames=2, name="fk_two"), tmp_path / "fk_two.npz"))
    overrides = {"commands.motion.clips": [clip_file, short]}
    evaluation = task_evaluation("g1_motion_tracking", {"envs_per_clip": 1})
    evaluation = evaluation.fitted(task_config(evaluation.task, overrides))
    env = make_env(task=evaluation.task, num_envs=evaluation.num_envs(), overrides=overrides)
    with pytest.raises(ValueError, match=r"clips \['fk_two'\]: fewer than 3 frames"):
        evaluation.run(env, lambda obs: torch.zeros(env.num_envs, env.action_dim))
