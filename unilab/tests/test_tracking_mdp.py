"""Behaviours of the motion-tracking MDP (adaptive start sampling, motion metrics, terminations,
the frame table), and of the observation, action and command managers it leans on: each test
fails on one small, deliberate change to the code it names (recorded beside it) and passes on the
code as written. Expected values are derived from the documented definitions (BeyondMimic's
adaptive sampling, exp(-error / std^2) kernels, "not within" termination limits), not read back
from the code under test."""

from __future__ import annotations

import math

import pytest
import torch
from fk_clip import synthetic_clip
from unilab.assets.motion import MotionClip
from unilab.assets.motion.io import save_clip
from unilab.tasks.tracking.config.g1 import tracking as g1_tracking
from unilab.tasks.tracking.mdp.frame_table import FrameTable
from unilab.tasks.tracking.mdp.sampling import StartSampler

from unilab import math as lm

CPU = torch.device("cpu")


def _sampler(lengths=(301,), mode="adaptive", weights=None, alpha=0.25, kernel_size=1, decay=0.5,
             uniform_ratio=0.1) -> StartSampler:
    weights = [1.0] * len(lengths) if weights is None else list(weights)
    return StartSampler(list(lengths), weights, 50, mode, uniform_ratio=uniform_ratio, alpha=alpha,
                        kernel_size=kernel_size, decay=decay, device=CPU)


def _record(sampler: StartSampler, clip: int, frame: int, failed: list[bool]) -> None:
    n = len(failed)
    sampler.record(torch.full((n,), clip), torch.full((n,), frame), torch.tensor(failed))


# ---- adaptive sampling: the EMA of failures per bin and the uniform floor ------------------------
# (mutants: the decay 1 - alpha replaced by alpha; the counts added without the factor alpha; every
#  reset counted as a failure; the floor without uniform_ratio; the kernel's first weight not 1)

def test_adaptive_probabilities_are_the_failure_ema_plus_the_uniform_floor_normalized():
    sampler = _sampler(alpha=0.25)  # 300 usable start frames: six bins of 50
    _record(sampler, 0, 210, [True, True, True, False, False, False, False, False])  # bin 4: 3 of 8 failed
    _record(sampler, 0, 10, [True, True, False])  # bin 0: 2 of 3 failed; bin 4 decays
    # failed <- (1 - alpha) failed + alpha * count
    ema = torch.zeros(6)
    ema[4] = (1 - 0.25) * (0.25 * 3)
    ema[0] = 0.25 * 2
    torch.testing.assert_close(sampler.failed, ema)
    p = ema + 0.1 / 6  # a 10% floor spread evenly over six equal bins
    torch.testing.assert_close(sampler.probabilities, p / p.sum())


# ---- the look-ahead kernel: lambda ** distance, the floor taking the kernel's whole weight -------
# (mutants: the floor not scaled by the kernel's weight; the borrowed failures not weighted)

def test_the_look_ahead_kernel_borrows_lambda_powers_of_the_failures_ahead_over_a_scaled_floor():
    sampler = _sampler(alpha=0.5, kernel_size=3, decay=0.5)
    _record(sampler, 0, 210, [True])  # bin 4: EMA 0.5
    borrowed = torch.tensor([0.0, 0.0, 0.25 * 0.5, 0.5 * 0.5, 0.5, 0.0])  # lambda^2, lambda^1, lambda^0
    p = borrowed + (1 + 0.5 + 0.25) * 0.1 / 6
    torch.testing.assert_close(sampler.probabilities, p / p.sum())


# ---- bins of several clips ----------------------------------------------------------------------
# (mutants: a failure's bin taken without its clip's bin offset; the kernel borrowing across clips)

def test_a_failure_in_the_second_clip_lands_in_that_clips_bin():
    sampler = _sampler(lengths=(301, 201))  # clip 0: bins 0-5, clip 1: bins 6-9
    _record(sampler, 1, 60, [True, True])  # clip 1, frames 50-99: its second bin
    assert sampler.failed.nonzero().flatten().tolist() == [7]
    assert sampler.probabilities.argmax().item() == 7


def test_the_look_ahead_kernel_does_not_borrow_failures_of_the_next_clip():
    sampler = _sampler(lengths=(301, 201), kernel_size=3, decay=0.8)
    _record(sampler, 1, 0, [True] * 4)  # the next clip's first bin
    per_frame = sampler.probabilities / sampler.bin_size
    # Clip 0 (weight 1/2) has no failure: its starts stay uniform over its 300 frames.
    torch.testing.assert_close(per_frame[:6], torch.full((6,), 0.5 / 300))
    assert per_frame[6] > per_frame[7]


# ---- clip weights: P(clip) * P(bin | clip), a distribution ---------------------------------------
# (mutants: the clip weights not normalized; the clip weights ignored)

def test_clip_weights_split_the_draws_and_the_bin_probabilities_sum_to_one():
    sampler = _sampler(lengths=(301, 201), mode="uniform", weights=(3.0, 1.0))
    p = sampler.probabilities
    torch.testing.assert_close(p.sum(), torch.tensor(1.0))
    torch.testing.assert_close(p[:6], torch.full((6,), 0.75 / 6))  # clip 0: 3/4, six equal bins
    torch.testing.assert_close(p[6:], torch.full((4,), 0.25 / 4))
    clip, _ = sampler.sample(20000, torch.Generator().manual_seed(0))
    assert 0.73 < (clip == 0).float().mean().item() < 0.77
    _, top = sampler.entropy_and_top()
    assert top.item() == pytest.approx(0.125)


# ---- uniform mode is uniform over frames, a short last bin included, whatever fails ---------------
# (mutants: every bin of a clip drawn alike, whatever its frame count; failures recorded (and
#  carried in the training state) outside adaptive mode)

def test_uniform_mode_weighs_a_short_last_bin_by_its_frames_and_learns_nothing_from_failures():
    sampler = _sampler(lengths=(455,), mode="uniform")  # 454 usable: nine bins of 50, one of 4
    expected = torch.tensor([50.0] * 9 + [4.0]) / 454
    torch.testing.assert_close(sampler.probabilities, expected)
    _record(sampler, 0, 210, [True] * 4)
    torch.testing.assert_close(sampler.probabilities, expected)
    assert not sampler.state_dict()["failed"].any()


# ---- a draw stays inside its bin ----------------------------------------------------------------
# (mutant: the offset in a bin drawn over bin_frames, not over the bin's own frame count)

def test_starts_drawn_in_a_short_last_bin_are_uniform_over_its_frames():
    sampler = _sampler(lengths=(455,), alpha=1.0, uniform_ratio=1e-6)
    _record(sampler, 0, 452, [True] * 8)  # every start goes to the 4-frame bin 450-453
    _, frames = sampler.sample(8000, torch.Generator().manual_seed(0))
    counts = torch.bincount(frames - 450, minlength=4).float() / frames.numel()
    assert frames.min() >= 450 and frames.max() <= 453
    assert (counts - 0.25).abs().max() < 0.03, counts


# ---- the sampling metrics: normalized entropy and the top probability ----------------------------
# (mutant: the entropy normalized by log(bins + 1), not log(bins))

def test_sampling_entropy_is_one_when_uniform_and_the_normalized_entropy_otherwise():
    sampler = _sampler()
    entropy, top = sampler.entropy_and_top()
    assert entropy.item() == pytest.approx(1.0, abs=1e-6) and top.item() == pytest.approx(1 / 6)
    _record(sampler, 0, 210, [True] * 4)
    p = sampler.probabilities.double()
    expected = -(p * p.log()).sum().item() / math.log(6)
    entropy, top = sampler.entropy_and_top()
    assert entropy.item() == pytest.approx(expected, rel=1e-5) and top.item() == pytest.approx(p.max().item())


# ---- the env: a synthetic G1 clip made by forward kinematics (tests/fk_clip.py) -----------------

N = 4


@pytest.fixture(scope="module")
def clip_file(tmp_path_factory):
    return str(save_clip(synthetic_clip(frames=150), tmp_path_factory.mktemp("clips") / "fk_sway.npz"))


def _tracking_env(make_env, clip_file, reset_params=None, **overrides):
    """g1_motion_tracking on mujoco without pushes; the reset event's params as given (none: no
    reset noise)."""
    return make_env(task="g1_motion_tracking", num_envs=N, overrides={
        "commands.motion.clips": [clip_file], "events.push": None, "validate_actions": False,
        "events.reset_from_motion.params": {"command_name": "motion", **(reset_params or {})}, **overrides})


# ---- where a failure is recorded: the frame the failing state was at ------------------------------
# (mutant: the failure recorded at the advanced target, one frame late)

def test_a_failure_is_recorded_in_the_bin_of_the_frame_the_state_failed_at(make_env, clip_file):
    env = _tracking_env(make_env, clip_file, **{
        "commands.motion.bin_s": 0.02, "commands.motion.adaptive_alpha": 1.0,  # one frame per bin, no decay
        "terminations.tracking.params.anchor_height": 1e-6})  # every first step fails
    motion = env.command_manager.term("motion")
    target = motion.frame.clone()  # the frame the next state is to reach: where it fails
    _, _, terminated, _, _ = env.step(torch.zeros(N, env.action_dim))
    assert terminated.all()
    expected = torch.bincount(target, minlength=motion.sampler.num_bins).float()
    torch.testing.assert_close(motion.sampler.failed, expected)


def _angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle (rad) of the rotation between unit quaternions a and b: 2 acos |<a, b>|."""
    dot = (a.double() * b.double()).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


# ---- the command's metrics: anchor against the clip, bodies against the relative reference -------
# (mutants: the body position error averaged with the anchor's row; the anchor's angle read from
#  the first tracked body; the joint error signed; entropy and top probability swapped; the
#  shared errors robot minus reference)

def test_the_motion_metrics_average_each_documented_error_over_envs(make_env, clip_file):
    env = _tracking_env(make_env, clip_file, reset_params={"pose_range": {"roll": (0.1, 0.1), "yaw": (0.3, 0.3)}})
    motion = env.command_manager.term("motion")
    metrics = dict(zip(motion.metric_names, motion.metrics().tolist()))
    clip = synthetic_clip(frames=150)
    target = motion.frame.cpu()
    anchor = clip.body_names.index("torso_link")
    robot_anchor = env.robot.body_pos_w[:, env.robot.body_index("torso_link", "test")]
    robot_anchor_quat = env.robot.body_quat_w[:, env.robot.body_index("torso_link", "test")]
    ref_pos, ref_quat = clip.body_pos_w[target, anchor], clip.body_quat_w[target, anchor]
    rel_pos, rel_quat = motion.relative()  # the relative reference of the tracked bodies
    bodies = torch.tensor([env.robot.body_index(b, "test") for b in motion.cfg.body_names])
    expected = {
        "error_anchor_pos": torch.linalg.vector_norm(ref_pos - robot_anchor, dim=-1).mean().item(),
        "error_anchor_rot": _angle(ref_quat, robot_anchor_quat).mean().item(),
        "error_body_pos": torch.linalg.vector_norm(rel_pos - env.robot.body_pos_w[:, bodies], dim=-1).mean().item(),
        "error_body_rot": _angle(rel_quat, env.robot.body_quat_w[:, bodies]).mean().item(),
        "error_joint_pos": (clip.joint_pos[target] - env.robot.joint_pos).abs().mean().item(),
    }
    pos_error, _ = motion.errors()  # documented as reference minus robot
    torch.testing.assert_close(pos_error[:, 0], ref_pos - robot_anchor)
    torch.testing.assert_close(pos_error[:, 1:], rel_pos - env.robot.body_pos_w[:, bodies])
    # The rigid yaw of the reset moves the anchor off the clip's heading, not off the relative reference.
    assert expected["error_anchor_rot"] > 0.25 > expected["error_body_rot"]
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, rel=1e-4, abs=1e-5), name
    p = motion.sampler.probabilities.double()
    assert metrics["sampling_entropy"] == pytest.approx(-(p * p.log()).sum().item() / math.log(p.numel()), rel=1e-5)
    assert metrics["sampling_top1_prob"] == pytest.approx(p.max().item(), rel=1e-6)
    assert metrics["sampling_top1_prob"] != pytest.approx(metrics["sampling_entropy"], rel=1e-3)


# ---- terminations: each limit on its own quantity, bodies and column --------------------------
# (mutants: the tilt compared against the whole limit, not gravity z's; the end effectors' rows
#  one body off; any end effector within the limit passing instead of all; the anchor's limit used
#  for the end effectors; the anchor_ori and end_effector_height columns swapped; the anchor
#  height at exactly its limit ending the episode)

TILTED = {"pose_range": {"z": (-0.08, 0.08), "roll": (-0.5, 0.5), "pitch": (-0.5, 0.5)},
          "joint_position_range": (-0.4, 0.4)}


def _termination_quantities(env):
    """Per env, from the clip and the robot's bodies: the anchor's height error, the difference of
    gravity's z in the anchor frames, and the largest end-effector height error."""
    motion = env.command_manager.term("motion")
    robot, tracked = env.robot, list(motion.cfg.body_names)
    down = torch.tensor([0.0, 0.0, -1.0]).expand(N, 3)
    anchor = robot.body_index("torso_link", "test")
    height = (motion.ref_anchor_pos_w[:, 2] - robot.body_pos_w[:, anchor, 2]).abs()
    gravity_z = lambda q: lm.quat_apply_inverse(q, down)[:, 2]
    tilt = (gravity_z(motion.ref_anchor_quat_w) - gravity_z(robot.body_quat_w[:, anchor])).abs()
    # The relative reference only shifts in x, y and turns about z: its heights are the clip's.
    ee = ["left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link"]
    ref_z = motion.ref_body_pos_w[:, [tracked.index(b) for b in ee], 2]
    robot_z = robot.body_pos_w[:, [robot.body_index(b, "test") for b in ee], 2]
    return height, tilt, (ref_z - robot_z).abs().max(dim=1).values


def _between(values: torch.Tensor) -> float:
    """A limit halfway between the two middle values: about half the envs beyond it."""
    v = values.sort().values
    return 0.5 * (v[N // 2 - 1] + v[N // 2]).item()


def test_each_tracking_termination_fires_beyond_its_own_limit_on_its_own_bodies(make_env, clip_file):
    height, tilt, ee = _termination_quantities(_tracking_env(make_env, clip_file, reset_params=TILTED))
    limits = {"anchor_height": _between(height), "anchor_ori": _between(tilt), "end_effector_height": _between(ee)}
    # The same seed and reset: the same state, now with limits that split the envs.
    env = _tracking_env(make_env, clip_file, reset_params=TILTED,
                        **{f"terminations.tracking.params.{k}": v for k, v in limits.items()})
    term = env.termination_manager.terms[0]
    assert list(term.components) == ["anchor_height", "anchor_ori", "end_effector_height", "clip_end"]
    fired = term.fn(env)
    expected = torch.stack((height > limits["anchor_height"], tilt > limits["anchor_ori"],
                            ee > limits["end_effector_height"], torch.zeros(N, dtype=torch.bool)), dim=1)
    assert not torch.equal(expected[:, 1], expected[:, 2])  # the two columns can be told apart
    assert torch.equal(fired, expected), (fired, expected)


def test_an_anchor_height_error_equal_to_its_limit_does_not_end_the_episode(make_env, clip_file):
    height, _, _ = _termination_quantities(_tracking_env(make_env, clip_file, reset_params=TILTED))
    k = int(height.argmax())
    env = _tracking_env(make_env, clip_file, reset_params=TILTED,
                        **{"terminations.tracking.params.anchor_height": height[k].item()})
    fired = env.termination_manager.terms[0].fn(env)
    assert not fired[k, 0]


# ---- the reset keeps joints inside 90% of their range by default ---------------------------------
# (mutant: the reset's default soft factor 1.0, the joints' full range)

@pytest.mark.parametrize("offset", [10.0, -10.0])  # beyond every joint's range
def test_a_reset_joint_offset_beyond_the_range_leaves_each_joint_at_its_soft_limit(make_env, clip_file, offset):
    env = _tracking_env(make_env, clip_file, reset_params={"joint_position_range": (offset, offset)})
    lo, hi = env.robot.joint_limits.unbind(1)
    mid, half = 0.5 * (lo + hi), 0.5 * (hi - lo)
    expected = mid + 0.9 * half if offset > 0 else mid - 0.9 * half
    torch.testing.assert_close(env.robot.joint_pos, expected.expand(N, -1), atol=1e-6, rtol=0)


# ---- observation groups: noise, then clip, then scale, per term's own columns ---------------------
# (mutants: the clip dropped; scale dividing; scale applied before the clip; the clip's lower
#  bound taken from the upper; the clip applied before the noise)

JOINT_POS = slice(9, 38)  # test_controlled's policy group: ang vel 3, gravity 3, command 3, joint_pos 29, ...
CLIPPED = {"observations.policy.terms.joint_pos.clip": [-0.02, 0.06],
           "observations.policy.terms.joint_pos.scale": 2.0}


def test_a_terms_clip_then_scale_apply_to_its_columns_only(make_env):
    clean = make_env(overrides={"observations.policy.enable_corruption": False})
    env = make_env(overrides={"observations.policy.enable_corruption": False, **CLIPPED})
    assert env.observation_manager.describe()["policy"]["joint_pos"] == JOINT_POS.stop - JOINT_POS.start
    raw, out = clean.obs["policy"], env.obs["policy"]
    values = raw[:, JOINT_POS]
    assert (values < -0.02).any() and (values > 0.06).any()  # both bounds are in play
    torch.testing.assert_close(out[:, JOINT_POS], 2.0 * values.clamp(-0.02, 0.06))
    torch.testing.assert_close(out[:, :JOINT_POS.start], raw[:, :JOINT_POS.start])
    torch.testing.assert_close(out[:, JOINT_POS.stop:], raw[:, JOINT_POS.stop:])


def test_a_noisy_terms_clip_bounds_its_noise_too(make_env):
    env = make_env(overrides=CLIPPED)  # joint_pos noise U(-0.01, 0.01), then the clip
    out = env.step(torch.zeros(N, env.action_dim))[0]["policy"][:, JOINT_POS]
    assert out.min().item() == pytest.approx(-0.04) and out.max().item() == pytest.approx(0.12)


# ---- actions on a subset of joints: their offset and scale, the rest hold the offset --------------
# (mutants: the subset scaled by 1; the subset's offset taken from the first joints)

def test_actions_on_a_joint_subset_move_only_those_joints_from_their_default(make_env, clip_file):
    env = _tracking_env(make_env, clip_file, **{"actions.joint_names": [".*_knee_joint", ".*_elbow_joint"],
                                                "actions.scale": 0.5})
    am, names = env.action_manager, env.robot.joint_names
    cols = [i for i, n in enumerate(names) if n.endswith(("_knee_joint", "_elbow_joint"))]
    assert am.action_dim == 4 and [names[c] for c in am.cols] == [names[c] for c in cols]
    action = torch.tensor([[1.0, -2.0, 0.5, 0.0]]).expand(N, 4)
    ctrl = am.process(action).clone()
    expected = env.default_joint_pos.expand(N, -1).clone()
    expected[:, cols] += 0.5 * action
    torch.testing.assert_close(ctrl, expected)


# ---- the frame table: every quantity of every clip's frame in its own columns --------------------
# (mutants: the tracked bodies' linear velocities read from the angular ones; the joint velocities
#  from the positions; the root read from the clip's first body, not the named root; the second
#  clip's rows offset by the first clip's length twice; a clip at another rate accepted)

def _clip(name: str, frames: int, seed: int, fps: float = 50.0) -> MotionClip:
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g)
    quat = r(frames, 4, 4)
    return MotionClip(name=name, fps=fps, joint_names=("j0", "j1"), body_names=("foot", "a", "b", "base"),
                      joint_pos=r(frames, 2), joint_vel=r(frames, 2), body_pos_w=r(frames, 4, 3),
                      body_quat_w=quat / quat.norm(dim=-1, keepdim=True), body_lin_vel_w=r(frames, 4, 3),
                      body_ang_vel_w=r(frames, 4, 3))


def test_the_frame_table_packs_each_clips_frames_by_name_at_their_global_index():
    clips = [_clip("first", 3, 0), _clip("second", 4, 1)]
    table = FrameTable(clips, ("j0", "j1"), "base", ("b", "a"), 50.0, CPU, "test")
    assert table.start.tolist() == [0, 3] and table.length.tolist() == [3, 4]
    tracked, root = [2, 1], 3
    for c, clip in enumerate(clips):
        for f in range(clip.num_frames):
            row = table.packed[table.start[c] + f]
            expected = {
                "joint_pos": clip.joint_pos[f], "joint_vel": clip.joint_vel[f],
                "root_pos": clip.body_pos_w[f, root], "root_quat": clip.body_quat_w[f, root],
                "root_lin_vel": clip.body_lin_vel_w[f, root], "root_ang_vel": clip.body_ang_vel_w[f, root],
                "body_pos": clip.body_pos_w[f, tracked], "body_quat": clip.body_quat_w[f, tracked],
                "body_lin_vel": clip.body_lin_vel_w[f, tracked], "body_ang_vel": clip.body_ang_vel_w[f, tracked],
            }
            for name, value in expected.items():
                assert torch.equal(row[table.columns[name]], value.flatten()), (c, f, name)
            twist = row[table.span("body_lin_vel", "body_ang_vel")]
            assert torch.equal(twist, torch.cat((expected["body_lin_vel"].flatten(), expected["body_ang_vel"].flatten())))


def test_the_frame_table_refuses_a_clip_at_another_rate_than_the_env_steps():
    with pytest.raises(ValueError, match="is at 30 fps, the env steps at 50 Hz"):
        FrameTable([_clip("slow", 3, 0, fps=30.0)], ("j0", "j1"), "base", ("a",), 50.0, CPU, "test")


# ---- the tracking reward's joint-limit penalty: outside 90% of the range by default ---------------
# (mutant: the reward's default soft factor 1.0, the joints' full range)

def test_the_joint_limit_penalty_defaults_to_the_distance_outside_ninety_percent_of_the_range(make_env, clip_file):
    params = {k: v for k, v in g1_tracking.g1_motion_tracking().rewards["tracking"].params.items() if k != "soft_factor"}
    # Every joint written at its upper limit (the reset's soft factor 1.0: the full range).
    env = _tracking_env(make_env, clip_file, reset_params={"joint_position_range": (10.0, 10.0), "soft_factor": 1.0},
                        **{"rewards.tracking.params": params})
    lo, hi = env.robot.joint_limits.unbind(1)
    torch.testing.assert_close(env.robot.joint_pos, hi.expand(N, -1))
    term = env.reward_manager.terms[0]
    penalty = term.fn(env)[:, list(term.components).index("joint_limits")]
    # hi - (mid + 0.9 * half) = 0.1 * half per joint.
    torch.testing.assert_close(penalty, (0.1 * 0.5 * (hi - lo)).sum().expand(N))


# ---- action scale patterns match whole joint names -----------------------------------------------
# (mutant: a pattern matching a joint name's prefix)

def test_an_action_scale_pattern_naming_only_a_prefix_of_a_joint_matches_no_joint(make_env, clip_file):
    sides = {"left_.*": 0.1, "right_.*": 0.2}
    with pytest.raises(ValueError, match="actions.scale: no pattern matches joint 'waist_yaw_joint'"):
        _tracking_env(make_env, clip_file, **{"actions.scale": {**sides, "waist": 0.3}})
    env = _tracking_env(make_env, clip_file, **{"actions.scale": {**sides, "waist_.*": 0.3}})
    expected = [0.1 if n.startswith("left_") else 0.2 if n.startswith("right_") else 0.3 for n in env.robot.joint_names]
    torch.testing.assert_close(env.action_manager.scale, torch.tensor(expected))


# ---- a reset row observes its new command at once ------------------------------------------------
# (mutant: the command manager's refresh skipped: a velocity command showed the old episode's
#  command until the next step)

def test_after_a_reset_the_observed_velocity_command_is_the_new_episodes(make_env):
    env = make_env(overrides={"observations.policy.enable_corruption": False})
    command = slice(6, 9)  # policy: base ang vel 3, projected gravity 3, command 3
    before = env.obs["policy"][:, command].clone()
    after_reset = env.reset()["policy"][:, command].clone()
    assert not torch.equal(before, after_reset)  # every row drew a new command
    stepped = env.step(torch.zeros(N, env.action_dim))[0]["policy"][:, command]
    assert torch.equal(stepped, after_reset)  # kept until its resampling time, seconds away


# ---- the evaluation hook takes only clips of the library -----------------------------------------
# (mutant: a clip index equal to the number of clips accepted)

def test_assigning_a_clip_index_past_the_library_is_refused(make_env, clip_file):
    motion = _tracking_env(make_env, clip_file).command_manager.term("motion")
    assert motion.library.num_clips == 1
    with pytest.raises(ValueError, match=r"clip indices in \[0, 1\)"):
        motion.assign(torch.ones(N, dtype=torch.int64))
    assert motion.assigned is None
    motion.assign(torch.zeros(N, dtype=torch.int64))
    assert motion.assigned.tolist() == [0] * N
