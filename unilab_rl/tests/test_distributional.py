import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from unilab_rl.networks.distributional import project_onto_support, soft_target_atoms


@settings(max_examples=40, deadline=None)
@given(reward=st.floats(-50, 50), discount=st.floats(0, 1), bonus=st.floats(-3, 3), seed=st.integers(0, 1000))
def test_projection_sums_to_one_for_any_target(reward, discount, bonus, seed):
    generator = torch.Generator().manual_seed(seed)
    probs = torch.rand(4, 11, generator=generator, dtype=torch.float64).softmax(-1)
    support = torch.linspace(-5, 5, 11, dtype=torch.float64)
    atoms = soft_target_atoms(support, torch.full((4,), reward, dtype=torch.float64),
                              torch.full((4,), discount, dtype=torch.float64),
                              torch.full((4,), bonus, dtype=torch.float64))
    projected = project_onto_support(probs, atoms, -5.0, 5.0)
    assert torch.allclose(projected.sum(-1), torch.ones(4, dtype=torch.float64))
    assert (projected >= 0).all()


def test_projection_preserves_the_mean_inside_the_support():
    support = torch.linspace(-1, 1, 5)
    probs = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]])
    atoms = support[None] + 0.25  # shift by half a bin
    projected = project_onto_support(probs, atoms, -1.0, 1.0)
    assert torch.allclose(projected, torch.tensor([[0.0, 0.0, 0.5, 0.5, 0.0]]))
    assert (projected * support).sum().item() == pytest.approx(0.25)


def test_terminal_target_collapses_onto_the_reward():
    support = torch.linspace(-2, 2, 5)
    probs = torch.full((1, 5), 0.2)
    atoms = soft_target_atoms(support, torch.tensor([1.0]), torch.tensor([0.0]), torch.tensor([0.3]))
    projected = project_onto_support(probs, atoms, -2.0, 2.0)
    assert torch.allclose(projected, torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0]]))
