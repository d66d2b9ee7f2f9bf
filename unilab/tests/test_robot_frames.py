"""The robot view's base-frame vectors against a rotation matrix built from the root quaternion."""

import pytest
import torch


def rotation_matrix(q: torch.Tensor) -> torch.Tensor:
    """Body-to-world rotation of unit quaternions (N, 4) wxyz, the textbook formula."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        torch.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


# Walking reads the gravity direction every step, so the two rotate together; tracking never
# reads it, so its velocity first rotates alone, and together with gravity once gravity is read.
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_base_velocity_and_gravity_in_the_base_frame(make_env, task):
    env = make_env(task=task, num_envs=6)
    robot = env.robot
    gen = torch.Generator().manual_seed(1)
    qpos, qvel = robot.qpos.clone(), robot.qvel.clone()
    quat = torch.nn.functional.normalize(torch.randn(6, 4, generator=gen), dim=1)
    a, b = robot.root_qpos_adr, robot.root_qvel_adr
    qpos[:, a + 3:a + 7] = quat
    qvel[:, b:b + 3] = torch.randn(6, 3, generator=gen)
    env.backend.set_state_where(torch.ones(6, dtype=torch.bool), qpos, qvel)
    robot.invalidate()
    world_to_body = rotation_matrix(robot.root_quat_w).transpose(1, 2)
    expected_vel = (world_to_body @ robot.root_lin_vel_w.unsqueeze(-1)).squeeze(-1)
    expected_gravity = world_to_body[:, :, 2] * -1.0  # R^T (0, 0, -1)
    torch.testing.assert_close(robot.root_lin_vel_b, expected_vel, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(robot.projected_gravity_b, expected_gravity, rtol=1e-5, atol=1e-5)
    robot.invalidate()
    torch.testing.assert_close(robot.root_lin_vel_b, expected_vel, rtol=1e-5, atol=1e-5)
    # The planted state is not trivial: tilted bases, moving.
    assert (robot.projected_gravity_b[:, 2] > -0.99).any() and robot.root_lin_vel_b.abs().max() > 0.1


def test_quaternion_rotations_match_mujoco():
    import mujoco
    import numpy as np

    from unilab import math as lm

    gen = torch.Generator().manual_seed(2)
    quat = torch.nn.functional.normalize(torch.randn(64, 4, generator=gen), dim=1)
    vec = torch.randn(64, 3, generator=gen)
    forward, inverse = np.zeros((64, 3)), np.zeros((64, 3))
    for i, (q, v) in enumerate(zip(quat.double().numpy(), vec.double().numpy())):
        mujoco.mju_rotVecQuat(forward[i], v, q)
        mujoco.mju_rotVecQuat(inverse[i], v, q * np.array([1.0, -1.0, -1.0, -1.0]))  # the conjugate
    torch.testing.assert_close(lm.quat_apply(quat, vec), torch.from_numpy(forward).float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lm.quat_apply_inverse(quat, vec), torch.from_numpy(inverse).float(),
                               rtol=1e-5, atol=1e-5)
    # Broadcasting: one quaternion per row against several vectors per row.
    many = torch.randn(64, 5, 3, generator=gen)
    torch.testing.assert_close(lm.quat_apply_inverse(quat.unsqueeze(1), many),
                               torch.stack([lm.quat_apply_inverse(quat, many[:, k]) for k in range(5)], 1))
