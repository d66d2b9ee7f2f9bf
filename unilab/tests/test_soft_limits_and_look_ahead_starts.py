"""Task-term edge cases: an unlimited joint under the soft joint limits, and the adaptive
start sampler's look-ahead kernel without failures."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from unilab.tasks.tracking.mdp.sampling import StartSampler
from unilab.terms.rewards import joint_limit_violation, soft_joint_limits

INF = float("inf")


def test_an_unlimited_joint_stays_unlimited_under_the_soft_joint_limits():
    # A continuous joint (a wheel) has no range: (-inf, inf). Its soft limits were NaN, and the
    # limit penalty of every row with it NaN.
    robot = SimpleNamespace(joint_limits=torch.tensor([[-1.0, 1.0], [-INF, INF]]),
                            joint_pos=torch.tensor([[0.95, 123.0], [0.0, -5.0]]))
    env = SimpleNamespace(robot=robot)
    lo, hi = soft_joint_limits(env, 0.9)
    torch.testing.assert_close(lo, torch.tensor([-0.9, -INF]))
    torch.testing.assert_close(hi, torch.tensor([0.9, INF]))
    torch.testing.assert_close(joint_limit_violation(env, lo, hi), torch.tensor([0.05, 0.0]))


def _sampler(lengths, kernel_size):
    return StartSampler(list(lengths), [1.0] * len(lengths), 50, "adaptive", uniform_ratio=0.1, alpha=0.5,
                        kernel_size=kernel_size, decay=0.8, device=torch.device("cpu"))


def test_with_a_look_ahead_kernel_starts_are_still_uniform_over_frames_without_failures():
    # Two clips of 301 and 201 frames (six and four full bins): with a kernel of 3 the floor of a
    # clip's last two bins was summed over fewer bins than the others', so the last second of
    # each clip drew 0.41 of the starts per frame of its first seconds.
    sampler = _sampler((301, 201), kernel_size=3)
    per_frame = sampler.probabilities / sampler.bin_size
    torch.testing.assert_close(per_frame[:6], torch.full((6,), 0.5 / 300))
    torch.testing.assert_close(per_frame[6:], torch.full((4,), 0.5 / 200))


def test_the_look_ahead_kernel_still_draws_starts_to_the_bins_before_a_failure():
    sampler = _sampler((301,), kernel_size=3)
    sampler.record(torch.zeros(8, dtype=torch.int64), torch.full((8,), 210), torch.ones(8, dtype=torch.bool))  # bin 4
    p = sampler.probabilities
    assert p[4] > p[3] > p[2] > p[1] and torch.isclose(p[1], p[0]) and torch.isclose(p[5], p[0])
    # The borrowed share decays with the distance: lambda for one bin ahead, lambda^2 for two.
    excess = p[2:5] - p[0]
    torch.testing.assert_close(excess / excess[2], torch.tensor([0.64, 0.8, 1.0]))
