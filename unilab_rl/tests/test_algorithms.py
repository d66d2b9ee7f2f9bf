import copy
import math
import time

import pytest
import torch
from helpers import tiny_agent
from unilab_rl.algorithms import update_metric_names
from unilab_rl.networks.flash import UnitBatchNorm, UnitLinear, UnitRMSNorm
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig

ALGOS = ["flashsac", "fastsac"]


def filled_runner(algo, steps=12, **overrides):
    env, config, agent = tiny_agent(algo, **overrides)
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", algo, 0), None,
                             runner_config=RunnerConfig(log_every=5))
    runner.train(max_env_steps=steps * env.num_envs)
    return runner


@pytest.mark.parametrize("algo", ALGOS)
def test_update_returns_finite_losses_and_changes_the_actor(algo):
    runner = filled_runner(algo)
    assert runner.updates > 0
    before = copy.deepcopy(runner.agent.actor.state_dict())
    metrics = runner.agent.update(runner.replay.sample(32))
    assert {"critic/loss", "critic/q_mean"} <= set(metrics)
    assert all(torch.isfinite(v).all() for v in metrics.values())
    runner.agent.update(runner.replay.sample(32))
    after = runner.agent.actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("algo", ALGOS)
def test_an_update_returns_exactly_the_metrics_its_algorithm_declares(algo):
    # The declaration is what a --goal on loss/<name> is checked against before training.
    runner = filled_runner(algo)
    seen = set()
    for _ in range(4):  # actor steps come every policy period; the critic's every update
        seen |= set(runner.agent.update(runner.replay.sample(32)))
    assert sorted(seen) == sorted(update_metric_names(algo))


@pytest.mark.parametrize("algo", ALGOS)
def test_deterministic_act_is_repeatable_and_bounded(algo):
    env, _, agent = tiny_agent(algo)
    obs = env.reset()
    first, second = agent.act(obs, deterministic=True), agent.act(obs, deterministic=True)
    assert torch.equal(first, second)
    assert first.shape == (env.num_envs, env.action_dim)
    assert first.abs().max() <= 1.0


def test_flashsac_weights_stay_projected_after_updates():
    runner = filled_runner("flashsac")
    for _ in range(3):
        runner.agent.update(runner.replay.sample(32))
    for network in (runner.agent.actor, runner.agent.critic):
        for layer in network.modules():
            if isinstance(layer, UnitLinear):
                assert torch.allclose(layer.weight.norm(dim=-1), torch.ones(()), atol=1e-5)
            if isinstance(layer, UnitBatchNorm):
                norm = torch.sqrt((layer.scale.square() + layer.bias.square()).sum(-1))
                assert torch.allclose(norm, torch.full_like(norm, math.sqrt(layer.scale.shape[-1])), atol=1e-4)
            if isinstance(layer, UnitRMSNorm):
                norm = layer.scale.norm(dim=-1)
                assert torch.allclose(norm, torch.full_like(norm, math.sqrt(layer.scale.shape[-1])), atol=1e-4)


def test_the_compiled_norm_projection_projects_what_the_eager_one_does():
    from unilab_rl.networks.flash import FlashCriticEnsemble, project_to_unit_norm, unit_norm_projection

    torch.manual_seed(0)
    critic = FlashCriticEnsemble(6, 2, 16, 1, 2, 21)
    eager = copy.deepcopy(critic)
    project = unit_norm_projection(critic, compiled=True)
    before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for _ in range(2):  # the second call must write the live parameters again, not a stale copy
        with torch.no_grad():  # off their norm bounds, as an optimizer step leaves them
            for mine, theirs in zip(critic.parameters(), eager.parameters(), strict=True):
                step = 0.3 * torch.randn_like(mine)
                mine.add_(step)
                theirs.add_(step)
        moved = [p.detach().clone() for p in critic.parameters()]
        project()
        project_to_unit_norm(eager)
        for mine, theirs, off in zip(critic.parameters(), eager.parameters(), moved, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
        assert any(not torch.equal(p, off) for p, off in zip(critic.parameters(), moved, strict=True))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - before == 1


def test_flashsac_noise_is_held_for_its_repeat_length():
    env, _, agent = tiny_agent("flashsac", noise_repeat_exponent=0.01, noise_repeat_max=3)
    obs = env.reset()
    agent.act(obs, deterministic=False)
    held = agent.noise.clone()
    hold = agent.noise_hold.clone()
    agent.act(obs, deterministic=False)
    still = (hold >= 2)
    assert torch.equal(agent.noise[still], held[still])


def test_flashsac_reward_scale_tracks_the_return_spread():
    _, _, agent = tiny_agent("flashsac")
    for _ in range(50):
        agent.observe({}, torch.full((8,), 10.0), torch.zeros(8, dtype=torch.bool), torch.zeros(8, dtype=torch.bool))
    # Returns approach 10 / (1 - gamma) = 1000; scaled returns must fit inside g_max.
    max_return = agent.return_scaler.running_return.abs().max()
    assert max_return / agent.return_scaler.scale() <= agent.config.g_max + 1e-4


def test_polyak_update_moves_every_parameter_and_float_buffer_toward_the_source_by_tau():
    from unilab_rl.learner import polyak_update, target_network

    source = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.BatchNorm1d(7), torch.nn.Linear(7, 2))
    target = target_network(source)
    with torch.no_grad():
        for tensor in [*source.parameters(), source[1].running_mean, source[1].running_var]:
            tensor.add_(torch.randn_like(tensor))
        source[1].num_batches_tracked.fill_(5)
    before = [t.clone() for t in [*target.parameters(), target[1].running_mean, target[1].running_var]]
    polyak_update(target, source, 0.25)
    after = [*target.parameters(), target[1].running_mean, target[1].running_var]
    wanted = [*source.parameters(), source[1].running_mean, source[1].running_var]
    for old, new, src in zip(before, after, wanted, strict=True):
        torch.testing.assert_close(new, 0.75 * old + 0.25 * src)
    assert target[1].num_batches_tracked.item() == 0  # integer buffers are not averaged


def test_polyak_update_refuses_networks_of_different_layouts():
    from unilab_rl.learner import polyak_update

    with pytest.raises(ValueError, match="polyak_update: target has 2 float tensors, source 4"):
        polyak_update(torch.nn.Linear(3, 3), torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)), 0.1)


@pytest.mark.slow  # torch.compile's first compile of two losses and their backward: about a minute on CPU
@pytest.mark.parametrize("algo", ALGOS)
def test_compiled_losses_learn_what_the_eager_losses_learn(algo):
    runner = filled_runner(algo)
    batches = [runner.replay.sample(32) for _ in range(4)]  # updates 0 and 2 also train the actor
    agents, graphs = [], []
    for compiled in (False, True):
        torch.manual_seed(0)
        _, _, agent = tiny_agent(algo, compile_losses=compiled)
        torch.manual_seed(1)
        before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
        metrics = [agent.update(batch) for batch in batches]
        graphs.append(torch._dynamo.utils.counters["stats"]["unique_graphs"] - before)
        agents.append((agent, metrics))
    assert graphs[0] == 0 and graphs[1] >= 2  # the eager run compiled nothing, the other both losses
    (eager, eager_metrics), (compiled, compiled_metrics) = agents
    for name in ("critic/loss", "critic/q_mean", "actor/loss", "actor/entropy"):
        torch.testing.assert_close(compiled_metrics[2][name], eager_metrics[2][name], rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(compiled.actor.parameters(), eager.actor.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    for mine, theirs in zip(compiled.target_critic.parameters(), eager.target_critic.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)


def test_the_running_observation_statistics_are_those_of_all_the_data_seen():
    from unilab_rl.normalizers import RunningMeanStd

    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 3, generator=g) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 0.0])
               for n in (7, 64, 1, 33)]
    stats = RunningMeanStd(3, epsilon=1e-8)
    for batch in batches:
        stats.update(batch)
    data = torch.cat(batches)
    assert torch.allclose(stats.mean, data.mean(0), atol=1e-5)
    assert torch.allclose(stats.var, data.var(0, unbiased=False), rtol=1e-4)
    assert float(stats.count) == pytest.approx(len(data))


def test_acting_draws_exactly_the_action_the_losses_sample():
    from unilab_rl.networks.squashed_gaussian import squashed_action, squashed_sample

    g = torch.Generator().manual_seed(1)
    mean, log_std, noise = (torch.randn(64, 29, generator=g) for _ in range(3))
    action, _ = squashed_sample(mean, log_std, noise, 2.0)
    assert torch.equal(squashed_action(mean, log_std, noise, 2.0), action)
    assert action.abs().max() <= 2.0


@pytest.mark.parametrize("algo", ALGOS)
def test_fractional_updates_per_step_carry_over_between_env_steps(algo):
    runner = filled_runner(algo, steps=8, updates_per_step=2.5)
    started = runner.updates
    runner.learn()
    runner.learn()
    assert runner.updates - started == 5  # 2.5 + 2.5, whatever credit the run left over
    assert runner.update_credit == pytest.approx(runner.update_credit % 1.0)
    assert runner.agent.updates == runner.updates


def test_flashsac_restarts_the_running_returns_it_loads_and_keeps_their_statistics():
    # Whoever loads a learner starts new episodes in every env (a resume, play): a saved
    # return would be added to theirs.
    runner = filled_runner("flashsac")
    saved = runner.agent.state_dict()["return_scaler"]
    assert saved["running_return"].abs().sum() > 0
    _, _, fresh = tiny_agent("flashsac")
    fresh.load_state_dict(runner.agent.state_dict())
    loaded = fresh.return_scaler.state_dict()
    assert torch.equal(loaded["running_return"], torch.zeros_like(saved["running_return"]))
    assert torch.equal(loaded["max_abs_return"], saved["max_abs_return"])
    assert torch.equal(loaded["return_stats.var"], saved["return_stats.var"])


class _WallSink:
    def __init__(self) -> None:
        self.rows: list[tuple[float, float]] = []  # (wall_s, updates so far) at each log

    def write(self, env_steps, wall_s, metrics) -> None:
        self.rows.append((wall_s, metrics["progress/updates"]))

    def close(self) -> None:
        pass


def test_training_says_when_its_first_updates_were_issued():
    env, config, agent = tiny_agent("flashsac")
    update, calls = agent.update, []

    def slow_first_update(batch):  # as a first compile is: on the host, inside the update call
        if not calls:
            time.sleep(0.2)
        calls.append(1)
        return update(batch)

    agent.update = slow_first_update
    sink = _WallSink()
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", "flashsac", 0), None, sink,
                             runner_config=RunnerConfig(log_every=1))
    result = runner.train(max_env_steps=16 * env.num_envs)
    # Logged after every env step: the first updates were issued after the last log without
    # updates, the slow first update included, and no later than the first log with them.
    first = next(i for i, (_, updates) in enumerate(sink.rows) if updates > 0)
    assert first > 0 and sink.rows[first - 1][0] + 0.2 <= result.first_learning_s <= sink.rows[first][0]
    # A session in which no update runs has none to report.
    env, config, agent = tiny_agent("flashsac", learning_starts=400)
    idle = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", "flashsac", 0), None)
    result = idle.train(max_env_steps=4 * env.num_envs)
    assert result.updates == 0 and result.first_learning_s is None
