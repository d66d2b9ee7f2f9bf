"""The quaternion helpers compute one product in two forms, picked by device: the bilinear form
(few kernels, for a GPU) and the complex / component form (long loops, for a CPU). Both must be
the same function of their inputs, including broadcast and strided (sliced) inputs."""

import pytest
import torch
import unilab.math as lm


def hamilton(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The Hamilton product written out term by term (wxyz)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack((aw * bw - ax * bx - ay * by - az * bz,
                        aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx,
                        aw * bz + ax * by - ay * bx + az * bw), dim=-1)


def random_quats(*shape: int, seed: int = 0, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(*shape, 4, generator=g, dtype=dtype), dim=-1)


def operand_pairs():
    g = torch.Generator().manual_seed(1)
    qpos = torch.randn(64, 36, generator=g)  # a free joint's quaternion at columns 3:7 (odd offset)
    yield "same shape", random_quats(64, 15, seed=2), random_quats(64, 15, seed=3)
    yield "broadcast", random_quats(64, 1, seed=4), random_quats(64, 15, seed=5)
    yield "one quaternion", random_quats(seed=6), random_quats(64, 15, seed=7)
    yield "odd-offset slice", qpos[:, 3:7], random_quats(64, seed=8)
    yield "one-row odd-offset slice", qpos[:1, 3:7], random_quats(1, seed=16)  # contiguous, odd offset
    yield "transposed", random_quats(15, 64, seed=9).transpose(0, 1), random_quats(64, 15, seed=10)
    yield "float64", random_quats(32, seed=11, dtype=torch.float64), random_quats(32, seed=12, dtype=torch.float64)


@pytest.mark.parametrize(("case", "a", "b"), list(operand_pairs()), ids=[c for c, *_ in operand_pairs()])
def test_both_forms_of_the_product_are_the_hamilton_product(case, a, b):
    expected = hamilton(*torch.broadcast_tensors(a, b))
    tol = 1e-12 if a.dtype == torch.float64 else 1e-6
    for form in (lm.quat_mul, lm._quat_mul_complex, lm._quat_mul_bilinear):
        got = form(*torch.broadcast_tensors(a, b))
        assert got.shape == expected.shape and got.dtype == a.dtype
        assert torch.allclose(got, expected, atol=tol, rtol=0), (case, form.__name__)
        swapped = form(*torch.broadcast_tensors(b, a))
        assert torch.allclose(swapped, hamilton(*torch.broadcast_tensors(b, a)), atol=tol, rtol=0)


def test_the_product_composes_rotations():
    a, b, v = random_quats(256, seed=13), random_quats(256, seed=14), torch.randn(256, 3)
    assert torch.allclose(lm.quat_apply(lm.quat_mul(a, b), v), lm.quat_apply(a, lm.quat_apply(b, v)), atol=1e-5)


def test_both_forms_of_the_rotation_columns_agree_with_rotating_the_axes():
    q = random_quats(64, 15, seed=15)
    ex = torch.tensor([1.0, 0.0, 0.0]).expand(64, 15, 3)
    ey = torch.tensor([0.0, 1.0, 0.0]).expand(64, 15, 3)
    r0, r1 = lm.quat_apply(q, ex), lm.quat_apply(q, ey)  # the matrix's first and second columns
    expected = torch.stack((r0[..., 0], r1[..., 0], r0[..., 1], r1[..., 1], r0[..., 2], r1[..., 2]), dim=-1)
    for form in (lm.matrix_first_two_columns, lm._matrix_first_two_columns_by_components,
                 lm._matrix_first_two_columns_bilinear):
        assert torch.allclose(form(q), expected, atol=1e-6), form.__name__
    # Off the unit sphere the two forms are still one polynomial.
    scaled = 1.7 * q
    assert torch.allclose(lm._matrix_first_two_columns_by_components(scaled),
                          lm._matrix_first_two_columns_bilinear(scaled), atol=1e-5)
