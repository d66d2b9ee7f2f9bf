"""FastSAC's critic ensemble runs its members as one batched chain; it must be the same E networks."""

import pytest
import torch
from unilab_rl.networks.mlp import CategoricalCriticEnsemble, layernorm_silu_mlp

OBS, ACTION, WIDTH, ATOMS = 11, 5, 64, 21


def separate_members(seed: int, ensemble: int) -> list[torch.nn.Sequential]:
    torch.manual_seed(seed)
    return [layernorm_silu_mlp(OBS + ACTION, WIDTH, ATOMS) for _ in range(ensemble)]


@pytest.mark.parametrize("ensemble", [2, 3])
def test_a_seed_gives_the_separate_networks_and_their_outputs(ensemble):
    members = separate_members(seed=7, ensemble=ensemble)
    torch.manual_seed(7)
    critic = CategoricalCriticEnsemble(OBS, ACTION, WIDTH, ensemble, ATOMS)
    # Trained-looking norms: the scale and shift are not left at their initial ones and zeros.
    with torch.no_grad():
        for member in members:
            for norm in (m for m in member if isinstance(m, torch.nn.LayerNorm)):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.3, 0.3)
        layers = [[m for m in member if isinstance(m, torch.nn.LayerNorm)] for member in members]
        for i, (scale, shift) in enumerate(zip(critic.norm_weights, critic.norm_biases)):
            scale.copy_(torch.stack([member[i].weight for member in layers]))
            shift.copy_(torch.stack([member[i].bias for member in layers]))
    obs, action = torch.randn(32, OBS), torch.randn(32, ACTION)
    expected = torch.stack([member(torch.cat([obs, action], dim=-1)) for member in members])
    got = critic(obs, action)
    assert got.shape == (ensemble, 32, ATOMS)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_the_linear_weights_are_the_separate_networks_draws():
    members = separate_members(seed=3, ensemble=2)
    torch.manual_seed(3)
    critic = CategoricalCriticEnsemble(OBS, ACTION, WIDTH, 2, ATOMS)
    linears = [[m for m in member if isinstance(m, torch.nn.Linear)] for member in members]
    assert len(critic.weights) == len(linears[0]) == 4
    for i, weight in enumerate(critic.weights):
        torch.testing.assert_close(weight.detach(), torch.stack([member[i].weight for member in linears]),
                                   rtol=0, atol=0)


def test_gradients_reach_every_member_and_the_action():
    critic = CategoricalCriticEnsemble(OBS, ACTION, WIDTH, 2, ATOMS)
    action = torch.randn(8, ACTION, requires_grad=True)
    # Only member 1's output in the loss: member 0's weights get no gradient, member 1's do.
    critic(torch.randn(8, OBS), action)[1].sum().backward()
    for weight in critic.weights:
        assert weight.grad[0].abs().max() == 0 and weight.grad[1].abs().max() > 0
    assert action.grad.abs().max() > 0
