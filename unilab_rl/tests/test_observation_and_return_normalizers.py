"""The observation normalizer's epsilon and clip, and FlashSAC's return scaler (tracked return, its
running maximum, the scale, and the restart on load). Each test names the small change to
``normalizers.py`` it fails on; expected values are worked out by hand or from an independent
computation."""

from __future__ import annotations

import math

import pytest
import torch
from unilab_rl.normalizers import ReturnScaler, RunningMeanStd, restarted_return_state

# ---- RunningMeanStd.normalize -----------------------------------------------------------------


def test_a_feature_that_never_varied_normalizes_to_zero_not_nan():
    # (mutant: ``rsqrt(var + 1e-8)`` -> ``rsqrt(var) + 1e-8``: 0 * inf = NaN)
    # A constant column (a fixed command, say) seen by 4096 envs at once: the batch outweighs the
    # 1e-4 prior count entirely in float32, so the variance is exactly 0.
    stats = RunningMeanStd(2)
    x = torch.stack((torch.full((4096,), 3.0), torch.linspace(-1.0, 1.0, 4096)), -1)
    stats.update(x)
    assert stats.var[0].item() == 0.0
    out = stats.normalize(x)
    assert torch.isfinite(out).all()
    assert torch.equal(out[:, 0], torch.zeros(4096))


def _stats(mean, var, clip=10.0):
    stats = RunningMeanStd(len(mean), clip=clip)
    stats.load_state_dict({"mean": torch.tensor(mean), "var": torch.tensor(var), "count": torch.tensor(100.0)})
    return stats


def test_normalize_divides_by_the_std_with_the_epsilon_inside_the_root():
    # (mutant: the epsilon added after the root: a zero-variance feature blows up to the clip)
    stats = _stats([1.0, 0.0], [4.0, 0.0])
    out = stats.normalize(torch.tensor([[3.0, 1e-6], [0.0, -2e-6]]))
    # (3 - 1) / sqrt(4 + 1e-8) = 1; 1e-6 / sqrt(1e-8) = 0.01
    torch.testing.assert_close(out, torch.tensor([[1.0, 0.01], [-0.5, -0.02]]), rtol=1e-5, atol=0.0)


@pytest.mark.parametrize("clip", [10.0, 2.5])
def test_normalized_values_are_clipped_on_both_sides(clip):
    # (mutants: ``clamp(-clip, clip)`` -> ``clamp(-clip)`` or no clamp)
    stats = _stats([0.0, 0.0], [1.0, 1.0], clip=clip)
    out = stats.normalize(torch.tensor([[100.0, -100.0], [1.0, -1.0]]))
    torch.testing.assert_close(out, torch.tensor([[clip, -clip], [1.0, -1.0]]))


# ---- ReturnScaler ------------------------------------------------------------------------------

GAMMA = 0.5


def _steps(scaler, steps):
    for reward, done in steps:
        scaler.update(torch.tensor(reward), torch.tensor(done))


def test_the_tracked_return_discounts_and_restarts_where_an_episode_ended():
    # (mutants: the ``(1 - done)`` factor dropped; the ``gamma`` factor dropped)
    scaler = ReturnScaler(2, GAMMA, g_max=5.0)
    _steps(scaler, [([1.0, 2.0], [False, False])])
    assert scaler.running_return.tolist() == [1.0, 2.0]
    # env 0's episode ended before this reward: its return restarts at the reward
    _steps(scaler, [([1.0, 1.0], [True, False])])
    assert scaler.running_return.tolist() == [1.0, 0.5 * 2.0 + 1.0]
    _steps(scaler, [([2.0, 0.0], [False, False])])
    assert scaler.running_return.tolist() == [0.5 * 1.0 + 2.0, 0.5 * 2.0]


def test_the_largest_return_magnitude_is_kept_across_steps_and_counts_negative_returns():
    # (mutants: ``max_abs_return`` overwritten by the newest step's; ``abs()`` dropped)
    scaler = ReturnScaler(2, GAMMA, g_max=5.0)
    _steps(scaler, [([-3.0, 1.0], [False, False]), ([1.0, 1.0], [True, True])])
    assert scaler.max_abs_return.item() == 3.0


def _returns_seen(steps, num_envs):
    """The tracked returns recomputed in plain Python, all of them (every env, every step)."""
    g, seen = [0.0] * num_envs, []
    for reward, done in steps:
        g = [GAMMA * gi * (not d) + r for gi, r, d in zip(g, reward, done, strict=True)]
        seen += g
    return seen


STEPS = [([1.0, -2.0, 0.5], [False, False, False]), ([3.0, 1.0, -1.0], [False, True, False]),
         ([0.0, 2.0, 4.0], [True, False, False]), ([-1.0, 0.5, 1.0], [False, False, True])]


def test_the_scale_is_the_std_of_the_returns_seen_when_it_dominates():
    # (mutants: the scale from the variance instead of its root; ``maximum`` -> ``minimum``)
    scaler = ReturnScaler(3, GAMMA, g_max=1e6)
    _steps(scaler, STEPS)
    seen = torch.tensor(_returns_seen(STEPS, 3), dtype=torch.float64)
    std = seen.var(unbiased=False).sqrt().item()
    assert std > 1.0  # so that var and std differ
    assert scaler.scale().item() == pytest.approx(std, rel=1e-3)  # the 1e-4 prior count aside


def test_the_scale_keeps_the_largest_return_inside_the_critic_support():
    # (mutants: ``max|G| / G_max`` -> ``max|G| * G_max``; ``maximum`` -> ``minimum``)
    g_max = 0.5
    scaler = ReturnScaler(3, GAMMA, g_max=g_max)
    _steps(scaler, STEPS)
    seen = _returns_seen(STEPS, 3)
    largest = max(abs(g) for g in seen)
    assert largest / g_max > math.sqrt(torch.tensor(seen).var(unbiased=False).item())  # this term dominates
    assert scaler.scale().item() == pytest.approx(largest / g_max)
    assert max(abs(g) for g in seen) / scaler.scale().item() == pytest.approx(g_max)


def test_a_saved_return_state_loads_into_a_scaler_with_another_env_count():
    # (mutant: the restarted running return shaped like the saved one, not like the loader's)
    saved = ReturnScaler(4, GAMMA, g_max=5.0)
    _steps(saved, [([1.0, 2.0, -3.0, 4.0], [False] * 4)])
    player = ReturnScaler(2, GAMMA, g_max=5.0)  # play runs its own env count
    player.load_state_dict(restarted_return_state(saved.state_dict(), player))
    assert torch.equal(player.running_return, torch.zeros(2))
    assert player.max_abs_return.item() == 4.0
    assert torch.equal(player.return_stats.var, saved.return_stats.var)
    assert player.scale().item() == saved.scale().item()
