"""Symmetry augmentation (``symmetry_augmentation=true``): every update also learns from the
left-right mirrored copy of its batch, using the mirrors the env's task declares."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from fake_env import PointMassEnv
from helpers import ACTION_SWAP, LEG_SWAP, tiny_agent
from unilab_rl.cli.play import run_episodes
from unilab_rl.contract import ContractViolation, EnvSpec, ReplayBatch
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig
from unilab_rl.symmetry import mirror_averaged, mirrored_batch

DO_NOTHING_RETURN = 10.1  # test_learning.py: a uniform-random policy returns ~7.3
ITERATIONS = {"fastsac": 600, "flashsac": 1000}


def _batch(rows: int = 5) -> ReplayBatch:
    gen = torch.Generator().manual_seed(0)
    obs = lambda: {"policy": torch.randn(rows, 3, generator=gen), "critic": torch.randn(rows, 4, generator=gen)}
    return ReplayBatch(obs=obs(), action=torch.randn(rows, 1, generator=gen), reward=torch.randn(rows, generator=gen),
                       discount=torch.rand(rows, generator=gen), next_obs=obs())


def test_a_mirrored_batch_is_the_batch_then_its_reflection():
    batch, mirrors = _batch(), PointMassEnv().mirrors
    both = mirrored_batch(batch, mirrors)
    for got, given, time_kept in ((both.obs["critic"], batch.obs["critic"], True),
                                  (both.next_obs["policy"], batch.next_obs["policy"], False)):
        assert torch.equal(got[:5], given)
        reflected = -given
        if time_kept:
            reflected[:, 3] = given[:, 3]  # the episode time does not reflect
        assert torch.equal(got[5:], reflected)
    assert torch.equal(both.action, torch.cat((batch.action, -batch.action)))
    assert torch.equal(both.reward, batch.reward.repeat(2)) and torch.equal(both.discount, batch.discount.repeat(2))


@pytest.mark.parametrize("algo", sorted(ITERATIONS))
def test_with_augmentation_each_update_sees_both_copies_and_the_learner_still_learns(algo):
    torch.manual_seed(0)
    env, config, agent = tiny_agent(algo, env=PointMassEnv(num_envs=16, seed=0), actor_width=32, critic_width=32,
                                    batch_size=128, updates_per_step=2.0, gamma=0.9, symmetry_augmentation=True)
    rows = []
    agent.critic.register_forward_pre_hook(lambda module, args: rows.append(args[0].shape[0]))
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", algo, 0), None,
                             runner_config=RunnerConfig(log_every=1000))
    runner.train(max_env_steps=ITERATIONS[algo] * env.num_envs)
    # 128 sampled + 128 mirrored in every critic pass (FlashSAC also passes a batch and its
    # next states as one: 512).
    assert rows and set(rows) <= {256, 512} and 256 in rows
    evaluation = run_episodes(PointMassEnv(num_envs=16, seed=9), agent, 32)
    assert evaluation["return_mean"] > DO_NOTHING_RETURN + 2.0, evaluation


@pytest.mark.parametrize("algo", sorted(ITERATIONS))
def test_augmentation_of_a_task_without_a_mirror_is_refused_naming_it(algo):
    env = PointMassEnv()
    env.mirrors = None
    with pytest.raises(ValueError, match=rf"{algo}: symmetry_augmentation=true needs a task that declares its "
                                         r"left-right mirror"):
        tiny_agent(algo, env=env, symmetry_augmentation=True)


def test_the_contract_checks_the_mirrors_shapes():
    env = PointMassEnv()
    spec = EnvSpec.from_env(env)
    index, sign = env.mirrors["observations"]["critic"]
    bad = {**env.mirrors, "observations": {**env.mirrors["observations"], "critic": (index[:3], sign[:3])}}
    with pytest.raises(ContractViolation, match=r"env.mirrors observations\['critic'\] index"):
        dataclasses.replace(spec, mirrors=bad).validate()
    with pytest.raises(ContractViolation, match=r"env.mirrors: covers"):
        dataclasses.replace(spec, mirrors={**env.mirrors, "observations": {"policy": env.mirrors["observations"]["policy"]}}).validate()


def test_the_contract_refuses_a_mirror_that_does_not_undo_itself():
    # A 3-cycle is a permutation but not a reflection; a sign of -1 on one side of a swapped pair
    # only is not one either: mirroring a mirrored sample would not give the sample back.
    env = PointMassEnv()
    spec = EnvSpec.from_env(env)
    index, sign = env.mirrors["observations"]["critic"]
    cycle = torch.tensor([1, 2, 0, 3], dtype=torch.int64)
    swapped = torch.tensor([1, 0, 2, 3], dtype=torch.int64)
    one_sided = torch.tensor([-1.0, 1.0, 1.0, 1.0])
    for bad_index, bad_sign in ((cycle, sign), (swapped, one_sided), (torch.tensor([0, 1, 2, 7]), sign)):
        bad = {**env.mirrors, "observations": {**env.mirrors["observations"], "critic": (bad_index, bad_sign)}}
        with pytest.raises(ContractViolation, match=r"env.mirrors observations\['critic'\]: expected a reflection"):
            dataclasses.replace(spec, mirrors=bad).validate()
    good = {**env.mirrors, "observations": {**env.mirrors["observations"],
                                            "critic": (swapped, torch.tensor([-1.0, -1.0, 1.0, -1.0]))}}
    dataclasses.replace(spec, mirrors=good).validate()


def test_the_walking_task_gives_the_runner_its_mirrors():
    pytest.importorskip("unilab")
    from unilab import make_manager_based_rl_env

    env = make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2)
    try:
        spec = EnvSpec.from_env(env)  # validates the shapes
        assert set(spec.mirrors["observations"]) == {"policy", "critic"}
        assert spec.mirrors["action"][0].shape == (env.action_dim,)
    finally:
        env.close()


def test_an_env_written_against_contract_1_1_is_told_what_is_missing():
    env = PointMassEnv()
    del env.mirrors
    with pytest.raises(ContractViolation, match=r"env.mirrors: missing; since contract 1.2"):
        EnvSpec.from_env(env)


_SWAP_MIRRORS = {"observations": {"policy": LEG_SWAP}, "action": ACTION_SWAP}


def _lopsided_policy(seed: int = 0):
    """A policy with no symmetry: a random nonlinear map of the observations."""
    gen = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(4, 8, generator=gen), torch.randn(8, 3, generator=gen)
    return lambda obs: torch.tanh(obs["policy"] @ w1) @ w2


def _mirror(x: torch.Tensor, pair) -> torch.Tensor:
    """A reflection written out here, not the module's ``reflected``: the tests check that one."""
    return x[:, pair[0]] * pair[1]


def test_a_mirror_averaged_policy_acts_in_the_mirrored_world_as_the_mirror_of_its_action():
    act = mirror_averaged(_lopsided_policy(), _SWAP_MIRRORS)
    obs = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    mirrored = act({"policy": _mirror(obs, _SWAP_MIRRORS["observations"]["policy"])})
    assert torch.allclose(mirrored, _mirror(act({"policy": obs}), _SWAP_MIRRORS["action"]), atol=1e-6)
    # The lopsided policy itself is not so: the test would pass for no policy at all otherwise.
    plain = _lopsided_policy()
    assert not torch.allclose(plain({"policy": _mirror(obs, _SWAP_MIRRORS["observations"]["policy"])}),
                              _mirror(plain({"policy": obs}), _SWAP_MIRRORS["action"]), atol=1e-3)


def test_mirror_averaging_cancels_a_one_sided_turn_and_keeps_a_symmetric_policy():
    # A constant waist-yaw command on every step (a turn to one side whatever the policy sees) is
    # what the mirror flips: averaging removes it, and the policy under it is what is left.
    base = _lopsided_policy()
    turning = lambda obs: base(obs) + torch.tensor([0.0, 0.0, 0.4])
    obs = {"policy": torch.randn(5, 4, generator=torch.Generator().manual_seed(2))}
    averaged = mirror_averaged(base, _SWAP_MIRRORS)
    assert torch.allclose(mirror_averaged(turning, _SWAP_MIRRORS)(obs), averaged(obs), atol=1e-6)
    # A policy that is already symmetric (an averaged one) acts as before.
    assert torch.allclose(mirror_averaged(averaged, _SWAP_MIRRORS)(obs), averaged(obs), atol=1e-6)
    assert not torch.allclose(averaged(obs), base(obs), atol=1e-3)
