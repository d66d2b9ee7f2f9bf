"""Symmetry: reflections move columns to their mirror partners, mirrored batches, and learners that
do not augment. The fake env's mirrors keep every column in place (index = arange), so a mirror
that moves columns (a left and a right leg swapping places, `helpers.LEG_SWAP`) is used here. Each
test names the small change to ``symmetry.py`` it fails on."""

from __future__ import annotations

import pytest
import torch
from fake_env import PointMassEnv
from helpers import ACTION_SWAP, LEG_SWAP, tiny_agent
from unilab_rl.contract import EnvSpec, ReplayBatch
from unilab_rl.symmetry import batch_mirrors, mirrored_batch, with_reflection


def test_a_reflection_moves_columns_to_their_mirror_partners_and_applies_the_signs():
    # (mutant: the ``index_select`` dropped: only the signs applied)
    x = torch.tensor([[0.1, 0.7, 0.3, 2.0], [-0.4, 0.2, -0.5, 1.0]])
    got = with_reflection(x, LEG_SWAP)
    expected_mirror = torch.tensor([[0.7, 0.1, -0.3, 2.0], [0.2, -0.4, 0.5, 1.0]])
    assert torch.equal(got, torch.cat((x, expected_mirror)))
    # reflecting the reflection gives the rows back
    assert torch.equal(with_reflection(got[2:], LEG_SWAP)[2:], x)


def test_a_mirrored_batch_swaps_each_groups_and_the_actions_partners():
    mirrors = {"observations": {"policy": LEG_SWAP, "critic": LEG_SWAP}, "action": ACTION_SWAP}
    obs = {"policy": torch.tensor([[1.0, 2.0, 3.0, 4.0]]), "critic": torch.tensor([[5.0, 6.0, 7.0, 8.0]])}
    nxt = {"policy": torch.tensor([[-1.0, -2.0, -3.0, -4.0]]), "critic": torch.tensor([[0.5, 0.6, 0.7, 0.8]])}
    batch = ReplayBatch(obs=obs, action=torch.tensor([[0.1, 0.2, 0.3]]), reward=torch.tensor([1.5]),
                        discount=torch.tensor([0.25]), next_obs=nxt)
    both = mirrored_batch(batch, mirrors)
    assert torch.equal(both.obs["policy"][1], torch.tensor([2.0, 1.0, -3.0, 4.0]))
    assert torch.equal(both.obs["critic"][1], torch.tensor([6.0, 5.0, -7.0, 8.0]))
    assert torch.equal(both.next_obs["policy"][1], torch.tensor([-2.0, -1.0, 3.0, -4.0]))
    assert torch.equal(both.action[1], torch.tensor([0.2, 0.1, -0.3]))
    assert both.reward.tolist() == [1.5, 1.5] and both.discount.tolist() == [0.25, 0.25]


def test_a_learner_that_does_not_augment_gets_no_mirrors_even_from_a_task_that_declares_them():
    # (mutant: ``if not enabled: return None`` dropped: every learner would train on mirrored copies)
    spec = EnvSpec.from_env(PointMassEnv())
    assert spec.mirrors is not None
    assert batch_mirrors(spec, False, "fastsac") is None
    assert batch_mirrors(spec, True, "fastsac") is spec.mirrors


@pytest.mark.parametrize("algo", ["fastsac", "flashsac"])
def test_without_augmentation_the_critic_sees_only_the_sampled_rows(algo):
    torch.manual_seed(0)
    env, _, agent = tiny_agent(algo, batch_size=16, symmetry_augmentation=False)
    rows = []
    agent.critic.register_forward_pre_hook(lambda module, args: rows.append(args[0].shape[0]))
    gen = torch.Generator().manual_seed(0)
    spec = EnvSpec.from_env(env)
    obs = lambda: {g: torch.randn(16, d, generator=gen) for g, d in spec.observation_spec.items()}  # noqa: E731
    agent.update(ReplayBatch(obs=obs(), action=torch.rand(16, spec.action_dim, generator=gen) * 2 - 1,
                             reward=torch.randn(16, generator=gen), discount=torch.full((16,), 0.9), next_obs=obs()))
    # 16 rows (FlashSAC passes a batch and its next states as one: 32), never the mirrored 32/64
    assert rows and set(rows) <= {16, 32} and 16 in rows
    if algo == "fastsac":
        assert set(rows) == {16}
