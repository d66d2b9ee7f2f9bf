"""Quaternion helpers on torch tensors (wxyz, the contract's convention)."""

from __future__ import annotations

import math

import torch

_CONSTANTS: dict = {}


def constant(values: tuple, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A small constant tensor made once per device: building it per call would be a host to
    device copy in every step on a GPU."""
    key = (values, device, dtype)
    t = _CONSTANTS.get(key)
    if t is None:
        t = _CONSTANTS[key] = torch.tensor(values, dtype=dtype, device=device)
    return t


def quat_apply_inverse(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate world-frame ``vec`` (..., 3) into the frame of ``quat`` (..., 4) wxyz."""
    # v + 2 w (v x u) + 2 (v x u) x u, u the vector part: the conjugate's rotation written with
    # the cross products' order swapped instead of a negation, and the doubling folded into the
    # last add (4 kernels).
    w, u = quat[..., :1], quat[..., 1:]
    t = torch.cross(vec, u, dim=-1)
    return torch.add(vec, torch.addcmul(torch.cross(t, u, dim=-1), w, t), alpha=2.0)


def quat_apply(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate body-frame ``vec`` (..., 3) into the world by ``quat`` (..., 4) wxyz."""
    # v + 2 w (u x v) + 2 u x (u x v), the doubling folded into the last add (4 kernels).
    w, u = quat[..., :1], quat[..., 1:]
    t = torch.cross(u, vec, dim=-1)
    return torch.add(vec, torch.addcmul(torch.cross(u, t, dim=-1), w, t), alpha=2.0)


def tilt_squared(quat: torch.Tensor) -> torch.Tensor:
    """|projected gravity_xy|^2 = 4 ((wy - xz)^2 + (wx + yz)^2), batched over the two terms:
    columns (w, w, x, y) times (y, x, z, z), then (wy, wx) + (-1, 1) * (xz, yz)."""
    dev = quat.device
    prod = quat.index_select(1, constant((0, 0, 1, 2), dev, torch.int64)) * \
        quat.index_select(1, constant((2, 1, 3, 3), dev, torch.int64))
    g = prod[:, :2] + prod[:, 2:] * constant((-1.0, 1.0), dev)
    return 4.0 * g.square().sum(dim=1)


def yaw_from_quat(quat: torch.Tensor) -> torch.Tensor:
    """Heading: the yaw of the body x axis projected on the ground plane."""
    w, x, y, z = quat.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def quat_from_yaw(yaw: torch.Tensor) -> torch.Tensor:
    half = 0.5 * yaw
    zeros = torch.zeros_like(yaw)
    return torch.stack((torch.cos(half), zeros, zeros, torch.sin(half)), dim=-1)


# The Hamilton product as one bilinear map: (a ⊗ b)_i = sum_jk C[j, k, i] a_j b_k, so a batch of
# products is one outer product and one matmul (2 kernels) instead of ~28 elementwise ops.
_HAMILTON = (
    # (j, k, i, sign) for w = aw bw - ax bx - ay by - az bz, x = aw bx + ax bw + ay bz - az by, ...
    (0, 0, 0, 1), (1, 1, 0, -1), (2, 2, 0, -1), (3, 3, 0, -1),
    (0, 1, 1, 1), (1, 0, 1, 1), (2, 3, 1, 1), (3, 2, 1, -1),
    (0, 2, 2, 1), (1, 3, 2, -1), (2, 0, 2, 1), (3, 1, 2, 1),
    (0, 3, 3, 1), (1, 2, 3, 1), (2, 1, 3, -1), (3, 0, 3, 1),
)
_BILINEAR: dict = {}


def _hamilton_matrix(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    key = ("hamilton", device, dtype)
    m = _BILINEAR.get(key)
    if m is None:
        m = torch.zeros(16, 4, device=device, dtype=dtype)
        for j, k, i, sign in _HAMILTON:
            m[4 * j + k, i] = sign
        _BILINEAR[key] = m
    return m


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The Hamilton product a ⊗ b of (..., 4) wxyz quaternions (broadcast), in the form that is
    cheap on the tensors' device: on a GPU the cost is kernel launches, on a CPU it is loops."""
    a, b = torch.broadcast_tensors(a, b)
    if a.device.type == "cpu" and a.dtype in _HAS_COMPLEX:
        return _quat_mul_complex(a, b)
    return _quat_mul_bilinear(a, b)


def _quat_mul_bilinear(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    outer = (a.unsqueeze(-1) * b.unsqueeze(-2)).reshape(*a.shape[:-1], 16)
    return outer @ _hamilton_matrix(a.device, a.dtype)


# On a CPU the outer product above broadcasts over a last dimension of 4, so its inner loop runs
# 4 elements at a time (about 0.5 ms for 1024 x 15 quaternions on one thread, against 0.04 ms
# for a contiguous multiply of as many elements), and the (M, 16) @ (16, 4) matmul is slow too.
# Written as a pair of complex numbers, q = (w + x i) + (y + z i) j, the product is
# (a1 + a2 j)(b1 + b2 j) = (a1 b1 - a2 conj(b2)) + (a1 b2 + a2 conj(b1)) j: four complex
# multiplies, each one loop over every quaternion: 5-9x faster on a CPU for 1024 x 14 or 15
# quaternions (as fast for 1024), where a GPU would run 9 kernels (the two conjugates are copies)
# for the bilinear form's 2.
_HAS_COMPLEX = (torch.float32, torch.float64)  # dtypes with a complex counterpart on a CPU


def _as_complex_pair(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(w + x i, y + z i) of (..., 4) wxyz quaternions: views where the layout allows (pairs
    of floats on even offsets), else of a fresh copy (a slice such as qpos[:, 3:7]; a clone,
    since ``contiguous()`` keeps the odd offset of a one-row slice, which it counts contiguous)."""
    # gcd(2, offset, strides...) is 2 exactly when all are even (one call, where a generator
    # over the strides would be one per stride on every product).
    if q.stride(-1) != 1 or math.gcd(2, q.storage_offset(), *q.stride()[:-1]) != 2:
        q = q.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(q.reshape(*q.shape[:-1], 2, 2)).unbind(-1)


def _quat_mul_complex(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a1, a2 = _as_complex_pair(a)
    b1, b2 = _as_complex_pair(b)
    product = torch.stack((a1 * b1 - a2 * b2.conj(), a1 * b2 + a2 * b1.conj()), dim=-1)
    return torch.view_as_real(product).reshape(a.shape)


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    return torch.remainder(angle + torch.pi, 2.0 * torch.pi) - torch.pi


def quat_conjugate(quat: torch.Tensor) -> torch.Tensor:
    """The inverse rotation of a unit quaternion."""
    return quat * constant((1.0, -1.0, -1.0, -1.0), quat.device)


def yaw_quat(quat: torch.Tensor) -> torch.Tensor:
    """The rotation about world z that has the heading of ``quat``."""
    return quat_from_yaw(yaw_from_quat(quat))


def quat_error_magnitude(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Angle (rad, in [0, pi]) of the rotation taking ``b`` to ``a``."""
    d = quat_mul(a, quat_conjugate(b))
    # atan2 of the vector part's norm keeps precision near zero, where acos(w) does not.
    return 2.0 * torch.atan2(torch.linalg.vector_norm(d[..., 1:], dim=-1), d[..., 0].abs())


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """wxyz of the rotation R = Rz(yaw) Ry(pitch) Rx(roll)."""
    half = 0.5 * torch.stack((roll, pitch, yaw), dim=-1)  # (..., 3)
    # The three axis rotations (cos h, sin h * axis) as one (..., 3, 4) tensor, then two products.
    axes = torch.cos(half).unsqueeze(-1) * constant(((1.0, 0.0, 0.0, 0.0),) * 3, half.device) + \
        torch.sin(half).unsqueeze(-1) * constant(((0.0, 1.0, 0.0, 0.0), (0.0, 0.0, 1.0, 0.0), (0.0, 0.0, 0.0, 1.0)),
                                                 half.device)
    return quat_mul(axes[..., 2, :], quat_mul(axes[..., 1, :], axes[..., 0, :]))


def _rotation_columns_matrix(device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """R's first two columns, row-major (R00, R01, R10, R11, R20, R21), as
    offset + (q q^T flattened) @ M for a unit quaternion q = (w, x, y, z)."""
    key = ("rotation_columns", device, dtype)
    cached = _BILINEAR.get(key)
    if cached is None:
        m = torch.zeros(16, 6, device=device, dtype=dtype)
        idx = lambda r, c: 4 * r + c  # noqa: E731  (q_r q_c)
        w, x, y, z = range(4)
        terms = {0: [(-2, y, y), (-2, z, z)], 1: [(2, x, y), (-2, w, z)], 2: [(2, x, y), (2, w, z)],
                 3: [(-2, x, x), (-2, z, z)], 4: [(2, x, z), (-2, w, y)], 5: [(2, y, z), (2, w, x)]}
        for col, parts in terms.items():
            for coef, r, c in parts:
                m[idx(r, c), col] += coef
        offset = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0], device=device, dtype=dtype)
        cached = _BILINEAR[key] = (offset, m)
    return cached


def matrix_first_two_columns(quat: torch.Tensor) -> torch.Tensor:
    """The rotation matrix's first two columns, flattened row-major to (..., 6): a continuous
    orientation encoding (no double cover, no wrap). On a GPU one outer product and one matmul;
    on a CPU, where both run slow inner loops over the last dimension of 4 (see quat_mul), the
    products of components."""
    if quat.device.type == "cpu":
        return _matrix_first_two_columns_by_components(quat)
    return _matrix_first_two_columns_bilinear(quat)


def _matrix_first_two_columns_bilinear(quat: torch.Tensor) -> torch.Tensor:
    offset, m = _rotation_columns_matrix(quat.device, quat.dtype)
    outer = (quat.unsqueeze(-1) * quat.unsqueeze(-2)).reshape(*quat.shape[:-1], 16)
    return torch.addmm(offset, outer.reshape(-1, 16), m).reshape(*quat.shape[:-1], 6)


def _matrix_first_two_columns_by_components(quat: torch.Tensor) -> torch.Tensor:
    w, x, y, z = quat.unbind(-1)
    # R00 = 1 - 2 (yy + zz), R01 = 2 (xy - wz), ..., R21 = 2 (yz + wx): the quadratic parts,
    # then one affine map for the factors and the diagonal's 1.
    quadratic = torch.stack((y * y + z * z, x * y - w * z, x * y + w * z,
                             x * x + z * z, x * z - w * y, y * z + w * x), dim=-1)
    dev, dtype = quat.device, quat.dtype
    return torch.addcmul(constant((1.0, 0.0, 0.0, 1.0, 0.0, 0.0), dev, dtype), quadratic,
                         constant((-2.0, 2.0, 2.0, -2.0, 2.0, 2.0), dev, dtype))
