"""The averaged policy (``averaged_policy_tau``): a Polyak average of the actor that acts
deterministically (evaluation, play, export) while collection keeps sampling the latest actor."""

import copy

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.algorithms import build_config
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig

ALGOS = ["flashsac", "fastsac"]
TAU = 0.25


def trained_agent(algo, tau=TAU):
    env, config, agent = tiny_agent(algo, env=PointMassEnv(num_envs=8, seed=5), averaged_policy_tau=tau)
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", algo, 0), None,
                             runner_config=RunnerConfig(log_every=5))
    runner.train(max_env_steps=12 * env.num_envs)
    assert agent.updates > 0
    return env, runner, agent


def float_state(module):
    return [t.detach().clone() for t in (*module.parameters(), *(b for b in module.buffers() if b.is_floating_point()))]


def actor_period(agent):
    return getattr(agent.config, "policy_period", None) or agent.config.actor_update_period


@pytest.mark.parametrize("algo", ALGOS)
def test_the_average_moves_by_tau_toward_the_actor_at_actor_updates_only(algo):
    _, runner, agent = trained_agent(algo)
    seen_actor_update = seen_critic_only = False
    for _ in range(2 * actor_period(agent)):
        with_actor = agent.updates % actor_period(agent) == 0
        before = float_state(agent.averaged_actor)
        agent.update(runner.replay.sample(16))
        after, actor = float_state(agent.averaged_actor), float_state(agent.actor)
        for old, new, source in zip(before, after, actor, strict=True):
            expected = old + TAU * (source - old) if with_actor else old
            torch.testing.assert_close(new, expected, rtol=1e-5, atol=1e-6)
        seen_actor_update |= with_actor
        seen_critic_only |= not with_actor
    assert seen_actor_update and (seen_critic_only or actor_period(agent) == 1)
    assert any(not torch.equal(a, b) for a, b in zip(float_state(agent.averaged_actor), float_state(agent.actor),
                                                     strict=True))


@pytest.mark.parametrize("algo", ALGOS)
def test_deterministic_actions_and_the_exported_module_come_from_the_average(algo):
    env, _, agent = trained_agent(algo)
    obs = env.reset()
    averaged = agent.act(obs, deterministic=True)
    torch.testing.assert_close(agent.deterministic_policy()(obs["policy"]), averaged, rtol=0, atol=0)
    latest = copy.deepcopy(agent)
    latest.averaged_actor = None
    assert not torch.allclose(latest.act(obs, deterministic=True), averaged)


@pytest.mark.parametrize("algo", ALGOS)
def test_collection_samples_the_latest_actor(algo):
    env, _, agent = trained_agent(algo)
    obs = env.reset()
    latest = copy.deepcopy(agent)
    latest.averaged_actor = None
    torch.manual_seed(3)
    with_average = agent.act(obs, deterministic=False)
    torch.manual_seed(3)
    without = latest.act(obs, deterministic=False)
    torch.testing.assert_close(with_average, without, rtol=0, atol=0)


@pytest.mark.parametrize("algo", ALGOS)
def test_the_average_survives_a_checkpoint_and_a_run_without_one_starts_it_at_its_actor(algo):
    _, _, agent = trained_agent(algo)
    state = agent.state_dict()
    _, _, restored = tiny_agent(algo, averaged_policy_tau=TAU)
    restored.load_state_dict(copy.deepcopy(state))
    for ours, theirs in zip(float_state(restored.averaged_actor), float_state(agent.averaged_actor), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)

    _, _, plain = trained_agent(algo, tau=0.0)
    plain_state = plain.state_dict()
    assert plain.averaged_actor is None and "averaged_actor" not in plain_state
    _, _, started = tiny_agent(algo, averaged_policy_tau=TAU)
    started.load_state_dict(copy.deepcopy(plain_state))
    for ours, theirs in zip(float_state(started.averaged_actor), float_state(plain.actor), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


@pytest.mark.parametrize("tau", [-0.1, 1.5])
def test_a_tau_outside_zero_to_one_is_refused_by_name(tau):
    with pytest.raises(ValueError, match="averaged_policy_tau"):
        build_config("fastsac", {"averaged_policy_tau": tau})
