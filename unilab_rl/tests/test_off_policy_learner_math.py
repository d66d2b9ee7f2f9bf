"""The off-policy learners' math (flashsac.py, fastsac.py, learner.py and
networks/{distributional,squashed_gaussian,flash}.py), pinned against references written here:
each test fails on a small deliberate change to the code it names and passes on the code as written.

How the expected values are derived (never read off the code under test):
- the categorical projection by the C51 paper's per-atom loop (clamp to [v_min, v_max], split each
  mass between the two neighbouring support points in proportion to its distance to the other one);
- the tanh-squashed Gaussian's log-probability by change of variables, ``Normal(mean, std).log_prob(u)
  - log(action_scale * (1 - tanh(u)^2))`` per dimension in float64, and target entropies from
  ``torch.distributions.Normal(0, std * action_scale).entropy()``;
- BatchNorm, RMSNorm, the blocks and the norm projections from their formulas with torch.var and
  vector norms;
- each learner's critic and actor losses step by step from snapshots of its networks taken before
  ``update`` (SAC with a categorical critic: next actions from the actor, the most pessimistic
  target member, ``r / reward_scale + discount * (z - alpha * log pi)``, cross-entropy summed over
  members and averaged over the batch; actor ``alpha * log pi - Q``), with the update's sampling
  noise redrawn from the same seed; the temperature's first Adam step moves log-alpha by the
  learning rate against the sign of ``alpha * (entropy - target)``;
- the zeta noise-hold law from ``k^-s`` normalized over 1..max.
Tiny networks and synthetic batches on CPU; compile off."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.contract import ReplayBatch
from unilab_rl.learner import eval_mode, optimizer_step, temperature_step
from unilab_rl.networks.distributional import pessimistic_soft_target, project_onto_support
from unilab_rl.networks.flash import (
    FlashActor,
    FlashCriticEnsemble,
    FlashTrunk,
    InvertedResidualBlock,
    UnitBatchNorm,
    UnitLinear,
    UnitRMSNorm,
    project_to_unit_norm,
)
from unilab_rl.networks.squashed_gaussian import gaussian_entropy_for_std, squashed_sample

ACTION_DIM = 2
ACTION_SCALE = 2.0


# ---- references -------------------------------------------------------------------------------

def c51_projection(probs: torch.Tensor, atoms: torch.Tensor, v_min: float, v_max: float) -> torch.Tensor:
    """The C51 projection, atom by atom (Bellemare et al. 2017, Algorithm 1), in float64."""
    batch, k = probs.shape
    dz = (v_max - v_min) / (k - 1)
    out = torch.zeros(batch, k, dtype=torch.float64)
    for i in range(batch):
        for j in range(k):
            tz = min(max(float(atoms[i, j]), v_min), v_max)
            b = (tz - v_min) / dz
            lo, hi = math.floor(b), math.ceil(b)
            p = float(probs[i, j])
            if lo == hi:
                out[i, lo] += p
            else:
                out[i, lo] += p * (hi - b)
                out[i, hi] += p * (b - lo)
    return out


def reference_sample(mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor, scale: float):
    """a = scale * tanh(u), u ~ N(mean, std); log p(a) by change of variables, float64."""
    mean, log_std, noise = mean.double(), log_std.double(), noise.double()
    std = log_std.exp()
    u = mean + std * noise
    log_prob = torch.distributions.Normal(mean, std).log_prob(u) - torch.log(scale * (1 - torch.tanh(u) ** 2))
    return scale * torch.tanh(u), log_prob.sum(-1)


def target_entropy_reference(action_dim: int, std: float, scale: float) -> float:
    return action_dim * float(torch.distributions.Normal(0.0, std * scale).entropy())


def batch_norm_reference(x, scale, bias, eps=1e-5):
    mean, var = x.mean(1, keepdim=True), x.var(1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * scale + bias


def expected_values(logits: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    return (logits.softmax(-1) * support).sum(-1)


def pessimistic_target_reference(next_logits, support, reward, discount, bonus, v_min, v_max):
    """Per sample the member with the lowest expected value, shifted and projected."""
    probs = next_logits.softmax(-1).double()
    pick = expected_values(next_logits, support).argmin(0)
    chosen = probs[pick, torch.arange(probs.shape[1])]
    atoms = reward.double()[:, None] + discount.double()[:, None] * (support.double()[None] - bonus.double()[:, None])
    return c51_projection(chosen, atoms, v_min, v_max)


def cross_entropy_summed_over_members(target_probs, logits):
    return float(-(target_probs[None] * logits.double().log_softmax(-1)).sum(-1).mean(-1).sum())


def float_state(module):
    buffers = (b for b in module.buffers() if b.is_floating_point())
    return [t.detach().clone() for t in (*module.parameters(), *buffers)]


def wide_action_env(num_envs=8):
    env = PointMassEnv(num_envs=num_envs)
    env.action_dim = ACTION_DIM  # synthetic batches only: the env is never stepped with it
    env.mirrors = None
    return env


def synthetic_batch(seed: int, size: int = 16, reward_range: float = 60.0, obs_offset: float = 0.0) -> ReplayBatch:
    g = torch.Generator().manual_seed(seed)

    def obs():
        return {"policy": torch.randn(size, 3, generator=g) * 2 + obs_offset,
                "critic": torch.randn(size, 4, generator=g) * 2 + obs_offset}

    # Discounts as the replay gives them: 0 for windows that terminated, gamma^k otherwise.
    discount = torch.tensor([0.0, 0.97, 0.97**2, 0.97**3])[torch.arange(size) % 4]
    reward = (torch.rand(size, generator=g) * 2 - 1) * reward_range
    action = (torch.rand(size, ACTION_DIM, generator=g) * 2 - 1) * ACTION_SCALE * 0.9
    return ReplayBatch(obs=obs(), action=action, reward=reward, discount=discount, next_obs=obs())


def quiet_actor_(actor):
    """Means 0 and std e^-4: sampled actions tanh(0.018 * noise) never saturate, so an action
    changes exactly when its noise does."""
    with torch.no_grad():
        for head in (actor.mean_head, actor.log_std_head):
            head.linear.weight.zero_()
            head.bias.zero_()


def perturb_(module, seed, size=0.1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(size * torch.randn(p.shape, generator=g))


# ---- distributional target --------------------------------------------------------------------
# (mutants: clamping dropped at either end, the split weights swapped, floor -> round)

def test_the_projection_splits_each_mass_by_distance_and_clamps_at_both_ends():
    support = torch.linspace(-1.0, 1.0, 5)  # bins of 0.5
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.25, 0.15]] * 3)
    atoms = torch.stack([support + 0.125,  # a quarter bin up: 3/4 stays, 1/4 moves up
                         support * 3.0,  # beyond both ends: clamped onto -1 and 1
                         support - 0.4])  # -1.4 clamps to -1; the rest 0.8 bin down
    got = project_onto_support(probs, atoms, -1.0, 1.0)
    torch.testing.assert_close(got.double(), c51_projection(probs, atoms, -1.0, 1.0), rtol=0, atol=1e-6)
    torch.testing.assert_close(got[0, :2], torch.tensor([0.075, 0.025 + 0.15]), rtol=0, atol=1e-6)
    torch.testing.assert_close(got[1], torch.tensor([0.3, 0.0, 0.3, 0.0, 0.4]), rtol=0, atol=1e-6)


def test_the_pessimistic_target_matches_the_per_atom_reference_with_clamping_and_done_masking():
    g = torch.Generator().manual_seed(4)
    support = torch.linspace(-3.0, 3.0, 13)
    next_logits = torch.randn(3, 8, 13, generator=g) * 2
    reward = torch.linspace(-5.0, 5.0, 8)  # some targets leave the support
    discount = torch.tensor([0.0, 0.9, 0.81, 0.0, 0.9, 0.9, 0.81, 0.9])  # 0: terminated windows
    bonus = torch.randn(8, generator=g) * 0.3
    got = pessimistic_soft_target(next_logits.softmax(-1), support, reward, discount, bonus, -3.0, 3.0)
    expected = pessimistic_target_reference(next_logits, support, reward, discount, bonus, -3.0, 3.0)
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=1e-6)


# ---- the tanh-squashed Gaussian ---------------------------------------------------------------
# (mutants: each term of the log-probability: the Gaussian's 1/2, its log std and log 2 pi, the
# tanh Jacobian's sign and softplus, the action-scale Jacobian's sign and per-dimension count;
# std = log_std; target entropy without e, without the action scale, with std for variance)

@pytest.mark.parametrize("scale", [1.0, 2.5])
def test_the_squashed_sample_and_its_log_probability_match_the_change_of_variables(scale):
    g = torch.Generator().manual_seed(7)
    mean = torch.randn(64, 3, generator=g) * 1.5
    log_std = torch.rand(64, 3, generator=g) * 3 - 2.5
    noise = torch.randn(64, 3, generator=g)
    action, log_prob = squashed_sample(mean, log_std, noise, scale)
    expected_action, expected_log_prob = reference_sample(mean, log_std, noise, scale)
    torch.testing.assert_close(action.double(), expected_action, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(log_prob.double(), expected_log_prob, rtol=1e-5, atol=1e-4)


def test_the_log_probability_stays_finite_and_exact_for_saturated_actions():
    # tanh(u) rounds to 1 in float32 for |u| > ~9; the softplus form keeps log(1 - tanh^2) exact.
    u = torch.tensor([[12.0, -15.0]])
    _, log_prob = squashed_sample(u, torch.zeros(1, 2), torch.zeros(1, 2), 1.0)
    # log(1 - tanh(u)^2) = log(4) - 2|u| - 2 log(1 + exp(-2|u|)), by hand.
    expected = sum(-0.5 * math.log(2 * math.pi) - (math.log(4.0) - 2 * abs(x) - 2 * math.log1p(math.exp(-2 * abs(x))))
                   for x in (12.0, -15.0))
    assert float(log_prob) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(("dim", "std", "scale"), [(1, 0.15, 1.0), (3, 0.125, 2.0), (29, 0.0625, 4.0)])
def test_the_target_entropy_is_that_of_a_gaussian_with_the_target_std_in_action_units(dim, std, scale):
    assert gaussian_entropy_for_std(dim, std, scale) == pytest.approx(target_entropy_reference(dim, std, scale),
                                                                      rel=1e-6)


# ---- FlashSAC's networks ----------------------------------------------------------------------
# (mutants: running-stat momentum 0.1 or 1 - momentum, running stats frozen, eval mode on batch
# statistics, variance not centred, statistics over features, scale dropped; the projections'
# norms; RMSNorm's mean -> sum; the residual and second ReLU; the post-norm; the log-std range)

def test_unit_batch_norm_normalizes_with_batch_statistics_and_tracks_them_at_momentum_0_01():
    g = torch.Generator().manual_seed(1)
    norm = UnitBatchNorm(2, 5)
    with torch.no_grad():
        norm.scale.copy_(torch.rand(2, 1, 5, generator=g) + 0.5)
        norm.bias.copy_(torch.randn(2, 1, 5, generator=g))
    x = torch.randn(2, 64, 5, generator=g) * 3 + 1
    torch.testing.assert_close(norm(x), batch_norm_reference(x, norm.scale, norm.bias), rtol=1e-5, atol=1e-5)
    # From (0, 1), one batch moves the running statistics 1% of the way to its own.
    torch.testing.assert_close(norm.running_mean, 0.01 * x.mean(1, keepdim=True))
    torch.testing.assert_close(norm.running_var, 0.99 + 0.01 * x.var(1, unbiased=False, keepdim=True))

    # Evaluation mode normalizes with the running statistics and leaves them alone.
    running = (norm.running_mean.clone(), norm.running_var.clone())
    norm.eval()
    y = torch.randn(2, 7, 5, generator=g)
    expected = (y - running[0]) / torch.sqrt(running[1] + 1e-5) * norm.scale + norm.bias
    torch.testing.assert_close(norm(y), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(norm.running_mean, running[0]) and torch.equal(norm.running_var, running[1])


def test_rms_norm_divides_each_sample_by_its_feature_rms():
    g = torch.Generator().manual_seed(2)
    norm = UnitRMSNorm(2, 6)
    with torch.no_grad():
        norm.scale.copy_(torch.rand(2, 1, 6, generator=g) + 0.5)
    x = torch.randn(2, 9, 6, generator=g) * 4
    expected = x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6) * norm.scale
    torch.testing.assert_close(norm(x), expected, rtol=1e-5, atol=1e-6)


def test_the_projections_put_every_norm_on_its_bound_and_keep_directions():
    torch.manual_seed(3)
    critic = FlashCriticEnsemble(5, 2, 16, 1, 2, 11)
    with torch.no_grad():  # off their bounds, as an optimizer step leaves them
        for p in critic.parameters():
            p.add_(0.5 * torch.randn_like(p))
    layers = [m for m in critic.modules() if isinstance(m, UnitLinear | UnitBatchNorm | UnitRMSNorm)]
    assert {type(m) for m in layers} == {UnitLinear, UnitBatchNorm, UnitRMSNorm}
    before = {id(m): [t.clone() for t in m.parameters()] for m in layers}
    project_to_unit_norm(critic)
    for layer in layers:
        old = before[id(layer)]
        if isinstance(layer, UnitLinear):
            expected = [old[0] / old[0].norm(dim=-1, keepdim=True)]  # each row (output unit) to norm 1
        elif isinstance(layer, UnitBatchNorm):  # (scale, bias) jointly to norm sqrt(features)
            joint = torch.cat(old, dim=-1).norm(dim=-1, keepdim=True)
            expected = [t * math.sqrt(old[0].shape[-1]) / joint for t in old]
        else:
            expected = [old[0] * math.sqrt(old[0].shape[-1]) / old[0].norm(dim=-1, keepdim=True)]
        for got, want in zip(layer.parameters(), expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_an_inverted_residual_block_adds_relu_bn_w2_relu_bn_w1_x_to_its_input():
    torch.manual_seed(4)
    block = InvertedResidualBlock(2, 8)
    perturb_(block, 5, 0.3)
    x = torch.randn(2, 32, 8)
    w1, w2 = block.expand.weight, block.contract.weight
    h = torch.relu(batch_norm_reference(x @ w1.transpose(1, 2), block.expand_norm.scale, block.expand_norm.bias))
    h = torch.relu(batch_norm_reference(h @ w2.transpose(1, 2), block.contract_norm.scale, block.contract_norm.bias))
    torch.testing.assert_close(block(x), x + h, rtol=1e-5, atol=1e-5)


def test_the_trunk_ends_in_rms_norm_so_every_sample_has_unit_feature_rms():
    torch.manual_seed(6)
    trunk = FlashTrunk(2, 5, 16, 1)
    out = trunk(torch.randn(2, 20, 5) * 3)
    torch.testing.assert_close(out.square().mean(-1), torch.ones(2, 20), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("raw", "expected"), [(-60.0, -10.0), (60.0, 2.0), (0.0, -4.0),
                                                (0.5, -10.0 + 6.0 * (math.tanh(0.5) + 1.0))])
def test_the_flash_actor_squashes_log_std_into_minus_10_to_2(raw, expected):
    actor = FlashActor(3, 2, 16, 1)
    with torch.no_grad():  # the log-std head then outputs its bias alone
        actor.log_std_head.linear.weight.zero_()
        actor.log_std_head.bias.fill_(raw)
    _, log_std = actor(torch.randn(4, 3))
    torch.testing.assert_close(log_std, torch.full((4, 2), expected), rtol=1e-6, atol=1e-5)


# ---- shared learner pieces --------------------------------------------------------------------
# (mutants: zero_grad dropped, clipping off or by value, clipping before the gradient hook, the
# temperature loss's sign / entropy sign / log-alpha in place of alpha, eval_mode not restoring)

def test_an_optimizer_step_uses_this_losss_gradient_alone():
    w = torch.nn.Parameter(torch.zeros(3))
    x = torch.tensor([1.0, -2.0, 3.0])
    optimizer = torch.optim.SGD([w], lr=0.1)
    optimizer_step(optimizer, (w * x).sum(), None)
    optimizer_step(optimizer, (w * x).sum(), None)
    torch.testing.assert_close(w.grad, x)
    torch.testing.assert_close(w.detach(), -0.2 * x)


@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5, 100.0])
def test_gradient_clipping_scales_the_hooked_gradient_to_max_grad_norm(max_grad_norm):
    # The hook stands in for a data-parallel all-reduce (a sum over 10 ranks): the clip must see
    # the reduced gradient, so every rank clips alike.
    w = torch.nn.Parameter(torch.zeros(2))
    x = torch.tensor([3.0, 4.0])  # gradient norm 5, 50 after the hook

    def hook(params):
        for p in params:
            p.grad.mul_(10.0)

    optimizer_step(torch.optim.SGD([w], lr=1.0), (w * x).sum(), hook, max_grad_norm)
    hooked = 10.0 * x
    norm = float(hooked.norm())
    expected = hooked * (max_grad_norm / norm if 0 < max_grad_norm < norm else 1.0)
    torch.testing.assert_close(w.grad, expected)
    torch.testing.assert_close(w.detach(), -expected)


@pytest.mark.parametrize("entropy", [0.7, -1.3])
def test_the_temperature_falls_when_entropy_exceeds_its_target_and_rises_below_it(entropy):
    alpha, target, lr = 0.2, -0.5, 0.5
    log_temperature = torch.tensor(math.log(alpha), requires_grad=True)
    optimizer = torch.optim.SGD([log_temperature], lr=lr)
    log_prob = torch.tensor([-entropy - 0.4, -entropy + 0.4])  # mean -entropy
    metrics = temperature_step(log_temperature, optimizer, log_prob, target, None)
    # loss alpha * (H - target), so d loss / d log alpha = alpha * (H - target).
    expected_log_alpha = math.log(alpha) - lr * alpha * (entropy - target)
    assert float(log_temperature.detach()) == pytest.approx(expected_log_alpha, rel=1e-6)
    assert float(metrics["actor/entropy"]) == pytest.approx(entropy, rel=1e-6)
    assert float(metrics["actor/temperature_loss"]) == pytest.approx(alpha * (entropy - target), rel=1e-6)
    assert float(metrics["actor/temperature"]) == pytest.approx(math.exp(expected_log_alpha), rel=1e-6)


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_the_module_was_in(training):
    module = torch.nn.BatchNorm1d(3).train(training)
    with eval_mode(module):
        assert not module.training
    assert module.training is training


# ---- FlashSAC's update against a step-by-step reference ---------------------------------------
# (mutants: reward * scale, reward normalization always on, the entropy bonus's sign, the online
# critic as target, the wrong halves of the cross-batch pass, critic loss averaged over members,
# no cross-batch pass, ensemble mean in the actor, the actor loss's sign, the actor in train mode
# for next actions, the critic in train mode for the actor, no cross-batch actor pass, q_mean in
# scaled units, target entropy without the action scale, projection bounds off the support,
# gamma in place of the batch's discount (no done masking), the target update's timing)

REWARD_SCALE = 8.0  # one observed reward of 40 in every env: max|G| / g_max = 40 / 5 dominates the std


def flashsac_agent(**overrides):
    settings = {"action_scale": ACTION_SCALE, "initial_temperature": 0.2, "g_max": 5.0, "target_tau": 0.3,
                "target_std": 0.2, **overrides}
    _, config, agent = tiny_agent("flashsac", env=wide_action_env(), **settings)
    ones = torch.ones(8, dtype=torch.bool)
    agent.observe({}, torch.full((8,), 40.0), ~ones, ~ones)
    perturb_(agent.target_critic, 11)  # a target apart from the critic, as after training
    return config, agent


def flashsac_critic_reference(actor, critic, target, alpha, batch, noise, config, reward_scale):
    size = batch.reward.shape[0]
    support = torch.linspace(-config.g_max, config.g_max, config.critic_bins)
    with torch.no_grad():
        mean, log_std = actor.eval()(batch.next_obs["policy"])  # next actions: the actor in eval mode
        next_action, next_log_prob = reference_sample(mean, log_std, noise, config.action_scale)
        next_action = next_action.float()
        # (s, a) and (s', a') through each critic as one BatchNorm batch.
        both_obs = torch.cat([batch.obs["critic"], batch.next_obs["critic"]])
        both_actions = torch.cat([batch.action, next_action])
        next_logits = target(both_obs, both_actions)[:, size:]
        target_probs = pessimistic_target_reference(next_logits, support, batch.reward / reward_scale, batch.discount,
                                                    alpha * next_log_prob, -config.g_max, config.g_max)
        logits = critic(both_obs, both_actions)[:, :size]
    loss = cross_entropy_summed_over_members(target_probs, logits)
    q_mean = float(expected_values(logits, support).mean()) * reward_scale
    return loss, q_mean


@pytest.mark.parametrize("normalize_reward", [True, False])
def test_a_flashsac_update_computes_the_soft_categorical_sac_losses(normalize_reward):
    config, agent = flashsac_agent(normalize_reward=normalize_reward)
    reward_scale = REWARD_SCALE if normalize_reward else 1.0
    batch = synthetic_batch(0, reward_range=60.0 if normalize_reward else 7.0)
    actor0, critic0, target0 = (copy.deepcopy(m) for m in (agent.actor, agent.critic, agent.target_critic))
    alpha = float(agent.log_temperature.detach().exp())
    assert agent.updates == 0  # this update also trains the actor and temperature
    torch.manual_seed(123)
    metrics = agent.update(batch)
    torch.manual_seed(123)
    critic_noise, actor_noise = torch.randn_like(batch.action), torch.randn_like(batch.action)

    loss, q_mean = flashsac_critic_reference(copy.deepcopy(actor0), critic0, target0, alpha, batch, critic_noise,
                                             config, reward_scale)
    assert float(metrics["critic/reward_scale"]) == pytest.approx(reward_scale, rel=1e-3)
    assert float(metrics["critic/loss"]) == pytest.approx(loss, rel=1e-5)
    assert float(metrics["critic/q_mean"]) == pytest.approx(q_mean, rel=1e-4, abs=1e-5)

    # Actor: the actor (training mode) sees s and s' as one batch; the updated critic, in eval
    # mode, scores the sampled actions; SAC's loss on the ensemble minimum.
    size = batch.reward.shape[0]
    support = torch.linspace(-config.g_max, config.g_max, config.critic_bins)
    with torch.no_grad():
        actor = copy.deepcopy(actor0).train()
        mean, log_std = actor(torch.cat([batch.obs["policy"], batch.next_obs["policy"]]))
        action, log_prob = reference_sample(mean[:size], log_std[:size], actor_noise, config.action_scale)
        q = expected_values(copy.deepcopy(agent.critic).eval()(batch.obs["critic"], action.float()), support)
    expected_actor_loss = float((alpha * log_prob - q.min(0).values.double()).mean())
    assert float(metrics["actor/loss"]) == pytest.approx(expected_actor_loss, rel=1e-5, abs=1e-6)

    # Temperature: entropy of the sampled actions against that of N(0, (target_std * action_scale)^2).
    entropy = float(-log_prob.mean())
    target_entropy = target_entropy_reference(ACTION_DIM, config.target_std, config.action_scale)
    assert float(metrics["actor/entropy"]) == pytest.approx(entropy, rel=1e-5)
    assert float(metrics["actor/temperature_loss"]) == pytest.approx(alpha * (entropy - target_entropy), rel=1e-5)
    # Adam's first step moves log alpha by the learning rate against the gradient's sign.
    step = config.learning_rate * math.copysign(1.0, entropy - target_entropy)
    assert float(metrics["actor/temperature"]) == pytest.approx(alpha * math.exp(-step), rel=1e-6)


def test_the_flashsac_target_follows_the_updated_critic_by_tau_after_every_update():
    config, agent = flashsac_agent()
    for index in range(2):  # the first with an actor step, the second the critic's alone
        batch = synthetic_batch(10 + index)
        # What the target computes its bootstrap with moves its own BatchNorm statistics too.
        target = copy.deepcopy(agent.target_critic)
        torch.manual_seed(5)
        noise = torch.randn_like(batch.action)
        flashsac_critic_reference(copy.deepcopy(agent.actor), copy.deepcopy(agent.critic), target,
                                  float(agent.log_temperature.detach().exp()), batch, noise, config, REWARD_SCALE)
        actor_before = float_state(agent.actor)
        torch.manual_seed(5)
        agent.update(batch)
        for old, source, new in zip(float_state(target), float_state(agent.critic), float_state(agent.target_critic),
                                    strict=True):
            torch.testing.assert_close(new, (1 - config.target_tau) * old + config.target_tau * source,
                                       rtol=1e-5, atol=1e-6)
        actor_moved = any(not torch.equal(a, b) for a, b in zip(actor_before, float_state(agent.actor), strict=True))
        assert actor_moved is (index == 0)  # actor every actor_update_period (2) updates


# (mutants: max_grad_norm not passed to the critic's or the actor's step; the critic not frozen
# while the actor's loss backpropagates through it)

def test_flashsac_clips_the_hooked_critic_and_actor_gradients_to_max_grad_norm():
    _, agent = flashsac_agent(max_grad_norm=1e-3)
    hooked = []

    def hook(params):  # a data-parallel all-reduce summing two equal ranks
        for p in params:
            p.grad.mul_(2.0)
        hooked.append([p.grad.clone() for p in params])

    agent.gradient_hook = hook
    agent.update(synthetic_batch(3))
    for network, seen in ((agent.critic, hooked[0]), (agent.actor, hooked[1])):
        grads = [p.grad for p in network.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in seen])))
        assert norm > 1e-2  # well above the bound: the clip is what brings it down
        for got, before in zip(grads, seen, strict=True):
            torch.testing.assert_close(got, before * (1e-3 / norm), rtol=1e-4, atol=1e-9)


# (mutants: the deterministic action or the exported policy without action_scale)

@pytest.mark.parametrize(("algo", "extra"), [("flashsac", {}), ("fastsac", {"normalize_observations": False})])
def test_deterministic_actions_are_action_scale_tanh_of_the_eval_mode_mean(algo, extra):
    env, _, agent = tiny_agent(algo, action_scale=ACTION_SCALE, **extra)
    obs = env.reset()
    perturb_(agent.actor, 1, 0.5)  # means away from 0, where tanh is not linear
    with eval_mode(agent.actor), torch.no_grad():
        mean, _ = agent.actor(obs["policy"])
    expected = ACTION_SCALE * torch.tanh(mean)
    assert expected.abs().max() > 1.0  # outside what an unscaled tanh can reach
    torch.testing.assert_close(agent.act(obs, deterministic=True), expected)
    torch.testing.assert_close(agent.deterministic_policy()(obs["policy"]), expected)


# ---- FlashSAC's noise repetition --------------------------------------------------------------
# (mutants: hold one step longer (> for >=), pmf k^s, the longest hold cut, no fresh noise at an
# episode's end, a time-out not counted as an end)

def test_noise_is_held_for_zeta_distributed_lengths():
    num_envs, longest, exponent = 3000, 3, 2.0
    env, _, agent = tiny_agent("flashsac", env=PointMassEnv(num_envs=num_envs),
                               noise_repeat_max=longest, noise_repeat_exponent=exponent)
    quiet_actor_(agent.actor)
    obs = env.reset()
    torch.manual_seed(0)
    # Fixed observations, the actor in eval mode: an action changes exactly when its noise does.
    actions = torch.stack([agent.act(obs, deterministic=False)[:, 0] for _ in range(longest + 3)])
    changed = actions[1:] != actions[:-1]  # changed[t - 1]: the action at t differs from t - 1
    assert changed[0].all()  # the second act draws every env's first hold
    # The hold drawn at step 1 lasts until the next change.
    holds = changed[1:].float().argmax(0) + 1
    assert changed[1:].any(0).all()
    pmf = torch.arange(1, longest + 1, dtype=torch.float64).pow(-exponent)
    pmf /= pmf.sum()
    frequency = torch.bincount(holds, minlength=longest + 1)[1:].double() / num_envs
    torch.testing.assert_close(frequency, pmf, rtol=0, atol=0.03)


def test_an_episode_that_ends_by_termination_or_time_out_starts_with_fresh_noise():
    num_envs = 600
    env, _, agent = tiny_agent("flashsac", env=PointMassEnv(num_envs=num_envs),
                               noise_repeat_max=16, noise_repeat_exponent=0.01)
    quiet_actor_(agent.actor)
    obs = env.reset()
    torch.manual_seed(0)
    agent.act(obs, deterministic=False)
    before = agent.act(obs, deterministic=False)  # every env holds a fresh noise for 1-16 steps
    rows = torch.arange(num_envs)
    terminated, truncated = rows % 3 == 0, rows % 3 == 1
    agent.observe({}, torch.zeros(num_envs), terminated, truncated)
    changed = (agent.act(obs, deterministic=False) != before).any(-1)
    assert changed[terminated].all() and changed[truncated].all()
    assert changed[rows % 3 == 2].float().mean() < 0.25  # only holds of one step ran out (~1/16)


# ---- FastSAC's update against a step-by-step reference ----------------------------------------
# (mutants: the online critic as target, the entropy bonus's sign, unnormalized next critic /
# critic / next actor observations, projection bounds off the support, critic loss averaged over
# members, gamma in place of the batch's discount, ensemble min in the actor, the actor loss's
# sign, target entropy not times action_dim, the critic normalizer not updated, plain Adam or no
# weight decay, no gradient clipping)

def fastsac_agent(**overrides):
    settings = {"action_scale": ACTION_SCALE, "initial_temperature": 0.2, "v_min": -3.0, "v_max": 3.0,
                "target_tau": 0.3, "target_entropy_per_dim": -0.5, **overrides}
    _, config, agent = tiny_agent("fastsac", env=wide_action_env(), **settings)
    perturb_(agent.target_critic, 12)
    perturb_(agent.actor, 13, 0.3)
    return config, agent


def test_fastsac_observe_feeds_both_observation_normalizers():
    _, agent = fastsac_agent()
    batch = synthetic_batch(1, size=256, obs_offset=3.0)
    agent.observe(batch.obs, torch.zeros(256), torch.zeros(256, dtype=torch.bool), torch.zeros(256, dtype=torch.bool))
    for group, normalizer in (("policy", agent.actor_obs_normalizer), ("critic", agent.critic_obs_normalizer)):
        torch.testing.assert_close(normalizer.mean, batch.obs[group].mean(0), rtol=1e-4, atol=1e-4)


def test_a_fastsac_update_computes_the_c51_sac_losses_on_normalized_observations():
    config, agent = fastsac_agent()
    batch = synthetic_batch(2, reward_range=5.0, obs_offset=3.0)
    agent.observe(batch.obs, batch.reward, torch.zeros(16, dtype=torch.bool), torch.zeros(16, dtype=torch.bool))
    actor0, critic0, target0 = (copy.deepcopy(m) for m in (agent.actor, agent.critic, agent.target_critic))
    policy_norm, critic_norm = agent.actor_obs_normalizer.normalize, agent.critic_obs_normalizer.normalize
    alpha = float(agent.log_temperature.detach().exp())
    torch.manual_seed(321)
    metrics = agent.update(batch)
    torch.manual_seed(321)
    critic_noise, actor_noise = torch.randn_like(batch.action), torch.randn_like(batch.action)

    support = torch.linspace(config.v_min, config.v_max, config.atoms)
    with torch.no_grad():
        mean, log_std = actor0(policy_norm(batch.next_obs["policy"]))
        next_action, next_log_prob = reference_sample(mean, log_std, critic_noise, config.action_scale)
        next_logits = target0(critic_norm(batch.next_obs["critic"]), next_action.float())
        target_probs = pessimistic_target_reference(next_logits, support, batch.reward, batch.discount,
                                                    alpha * next_log_prob, config.v_min, config.v_max)
        logits = critic0(critic_norm(batch.obs["critic"]), batch.action)
    assert float(metrics["critic/loss"]) == pytest.approx(cross_entropy_summed_over_members(target_probs, logits),
                                                          rel=1e-5)
    assert float(metrics["critic/q_mean"]) == pytest.approx(float(expected_values(logits, support).mean()),
                                                            rel=1e-4, abs=1e-5)

    with torch.no_grad():
        mean, log_std = actor0(policy_norm(batch.obs["policy"]))
        action, log_prob = reference_sample(mean, log_std, actor_noise, config.action_scale)
        q = expected_values(agent.critic(critic_norm(batch.obs["critic"]), action.float()), support)
    expected_actor_loss = float((alpha * log_prob - q.mean(0).double()).mean())  # FastSAC: the ensemble mean
    assert float(metrics["actor/loss"]) == pytest.approx(expected_actor_loss, rel=1e-5, abs=1e-6)
    entropy = float(-log_prob.mean())
    target_entropy = config.target_entropy_per_dim * ACTION_DIM
    assert float(metrics["actor/temperature_loss"]) == pytest.approx(alpha * (entropy - target_entropy), rel=1e-5)
    step = config.learning_rate * math.copysign(1.0, entropy - target_entropy)
    assert float(metrics["actor/temperature"]) == pytest.approx(alpha * math.exp(-step), rel=1e-6)


def test_fastsac_steps_actor_and_critic_with_adamw_at_the_configured_weight_decay():
    config, agent = fastsac_agent(weight_decay=0.05)
    for optimizer in (agent.actor_optimizer, agent.critic_optimizer):
        assert type(optimizer) is torch.optim.AdamW
        assert [group["weight_decay"] for group in optimizer.param_groups] == [config.weight_decay]


def test_fastsac_clips_the_hooked_critic_and_actor_gradients_to_max_grad_norm():
    _, agent = fastsac_agent(max_grad_norm=1e-3)
    hooked = []

    def hook(params):
        for p in params:
            p.grad.mul_(2.0)
        hooked.append([p.grad.clone() for p in params])

    agent.gradient_hook = hook
    agent.update(synthetic_batch(3, reward_range=5.0))
    for network, seen in ((agent.critic, hooked[0]), (agent.actor, hooked[1])):
        grads = [p.grad for p in network.parameters() if p.grad is not None]
        norm = float(torch.linalg.vector_norm(torch.cat([g.flatten() for g in seen])))
        assert norm > 1e-2
        for got, before in zip(grads, seen, strict=True):
            torch.testing.assert_close(got, before * (1e-3 / norm), rtol=1e-4, atol=1e-9)
