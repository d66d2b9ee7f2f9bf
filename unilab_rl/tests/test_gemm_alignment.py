"""FastSAC's and FlashSAC's networks pad their GEMMs' sizes to multiples of 8 (fast bf16 kernels)
without changing what they compute: same outputs and gradients as the plain unpadded layers."""

import pytest
import torch
from torch.overrides import TorchFunctionMode
from unilab_rl.networks import flash
from unilab_rl.networks.flash import FlashActor, FlashCriticEnsemble
from unilab_rl.networks.mlp import GEMM_MULTIPLE, CategoricalCriticEnsemble, GaussianActor, layernorm_silu_mlp

# The G1's awkward sizes in miniature: 13 + 6 = 19 inputs, 21 atoms, 2 x 5 = 10 actor outputs.
OBS, ACTION, WIDTH, ATOMS = 13, 6, 64, 21


class GemmShapes(TorchFunctionMode):
    """Records the operand shapes of every linear, baddbmm and bmm call."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.linear:
            self.shapes.append(("linear", tuple(args[0].shape), tuple(args[1].shape)))
        elif func is torch.baddbmm:
            self.shapes.append(("baddbmm", tuple(args[1].shape), tuple(args[2].shape)))
        elif func is torch.bmm:
            self.shapes.append(("bmm", tuple(args[0].shape), tuple(args[1].shape)))
        return func(*args, **(kwargs or {}))


def assert_aligned(shapes) -> None:
    """Every GEMM's inner and output sizes are multiples of GEMM_MULTIPLE (the batch is free)."""
    assert shapes
    for name, x, w in shapes:
        inner, out = (w[-1], w[-2]) if name == "linear" else (w[-2], w[-1])
        assert x[-1] == inner and inner % GEMM_MULTIPLE == 0 and out % GEMM_MULTIPLE == 0, (name, x, w)


def test_the_critic_pads_its_input_and_atoms_and_matches_the_separate_networks():
    torch.manual_seed(5)
    members = [layernorm_silu_mlp(OBS + ACTION, WIDTH, ATOMS) for _ in range(2)]
    torch.manual_seed(5)
    critic = CategoricalCriticEnsemble(OBS, ACTION, WIDTH, 2, ATOMS)
    obs, action = torch.randn(16, OBS), torch.randn(16, ACTION, requires_grad=True)
    with GemmShapes() as mode:
        got = critic(obs, action)
    assert_aligned(mode.shapes)
    assert got.shape == (2, 16, ATOMS)
    expected = torch.stack([member(torch.cat([obs, action], dim=-1)) for member in members])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)

    # Gradients: the stored (unpadded) parameters get those of the separate networks.
    upstream = torch.randn_like(got)
    (got * upstream).sum().backward()
    (expected * upstream).sum().backward()
    linears = [[m for m in member if isinstance(m, torch.nn.Linear)] for member in members]
    for i, (weight, bias) in enumerate(zip(critic.weights, critic.biases)):
        assert weight.grad.shape == weight.shape
        torch.testing.assert_close(weight.grad, torch.stack([m[i].weight.grad for m in linears]),
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(bias.grad, torch.stack([m[i].bias.grad for m in linears]),
                                   rtol=1e-5, atol=1e-5)


def test_the_actor_pads_its_output_and_matches_its_plain_net():
    actor = GaussianActor(OBS, 5, WIDTH)
    with torch.no_grad():
        actor.net[-1].weight.normal_()  # past the near-zero initial output layer
    obs = torch.randn(16, OBS)
    with GemmShapes() as mode:
        mean, log_std = actor(obs)
    # The input layer is the observation's own width; the output layer is padded from 10 to 16.
    name, x, w = mode.shapes[-1]
    assert name == "linear" and w == (16, WIDTH // 4)
    plain_mean, plain_raw = actor.net(obs).split(5, dim=-1)
    torch.testing.assert_close(mean, plain_mean, rtol=1e-6, atol=1e-6)
    # The log-std half too (the padding sits after it and must not shift it).
    span = actor.log_std_max - actor.log_std_min
    torch.testing.assert_close(log_std, actor.log_std_min + 0.5 * span * (torch.tanh(plain_raw) + 1.0),
                               rtol=1e-6, atol=1e-6)
    assert mean.shape == log_std.shape == (16, 5)

    mean.sum().backward()
    grad = actor.net[-1].weight.grad.clone()
    actor.zero_grad()
    plain_mean.sum().backward()
    assert actor.net[-1].weight.grad.shape == (10, WIDTH // 4)
    torch.testing.assert_close(grad, actor.net[-1].weight.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("network", ["critic", "actor"])
def test_flashsac_networks_pad_every_gemm_and_compute_what_the_unpadded_layers_do(network, monkeypatch):
    torch.manual_seed(3)
    if network == "critic":
        net = FlashCriticEnsemble(OBS, ACTION, 16, 1, 2, ATOMS)
        inputs = (torch.randn(16, OBS), torch.randn(16, ACTION))
    else:
        net = FlashActor(OBS, 5, 16, 1)
        inputs = (torch.randn(16, OBS),)

    def run():
        net.zero_grad()
        out = net(*inputs)
        outputs = out if isinstance(out, tuple) else (out,)
        sum(o.sin().sum() for o in outputs).backward()
        return [o.detach() for o in outputs], {name: p.grad.clone() for name, p in net.named_parameters()}

    with GemmShapes() as mode:
        padded, padded_grads = run()
    assert_aligned(mode.shapes)
    # The same network with the padding taken out: plain bmm on the stored sizes.
    monkeypatch.setattr(flash, "zero_pad_to_gemm_multiple", lambda t, dim: t)
    with GemmShapes() as mode:
        plain, plain_grads = run()
    with pytest.raises(AssertionError):
        assert_aligned(mode.shapes)  # the sizes above really were awkward
    for mine, theirs in zip(padded, plain, strict=True):
        assert mine.shape == theirs.shape
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
    for name, grad in plain_grads.items():
        assert padded_grads[name].shape == grad.shape
        torch.testing.assert_close(padded_grads[name], grad, rtol=1e-5, atol=1e-5, msg=name)
