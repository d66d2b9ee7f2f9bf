"""Term functions (``unilab.terms``): the terminal penalty, soft joint limits, the tilt and height
terminations at their limits, sensor observations, reset offsets, pushes, and friction, mass and
centre-of-mass randomization. Each test fails on one small, deliberate change to the code it names
(recorded beside it) and passes on the code as written. Expected values are worked out by hand or
by an independent computation."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from unilab.managers.event import StateTransaction
from unilab.terms import events as ev
from unilab.terms import observations as obs_terms
from unilab.terms import rewards as rew
from unilab.terms import terminations as term

N = 4


def _cfg(**params):
    return SimpleNamespace(params=params)


# ---- is_terminated: the terminal penalty reads terminations, not time-outs ---------------------
# (mutant: ``termination_manager.terminated`` -> ``termination_manager.truncated``)

def test_the_terminal_penalty_is_one_on_a_fall_and_zero_on_a_time_out():
    manager = SimpleNamespace(terminated=torch.tensor([True, False, False]),
                              truncated=torch.tensor([False, True, False]))
    env = SimpleNamespace(termination_manager=manager)
    assert rew.is_terminated(env).tolist() == [1.0, 0.0, 0.0]


# ---- joint_pos_limits: without soft_factor the range is shrunk to 0.9 of itself ----------------
# (mutant: the default ``soft_factor`` 0.9 -> 1.0)

def test_joint_pos_limits_defaults_to_a_soft_factor_of_nine_tenths():
    robot = SimpleNamespace(joint_limits=torch.tensor([[-1.0, 1.0], [0.0, 2.0]]),
                            joint_pos=torch.tensor([[0.95, 0.0], [0.0, 1.0]]))
    env = SimpleNamespace(robot=robot)
    penalty = rew.joint_pos_limits(_cfg(), env)(env)
    # soft ranges [-0.9, 0.9] and [0.1, 1.9]: row 0 is 0.05 above the first and 0.1 below the
    # second; row 1 is inside both.
    torch.testing.assert_close(penalty, torch.tensor([0.15, 0.0]))


# ---- terminations end an episode beyond the limit, not at it -----------------------------------
# (mutants: ``~(g_z <= -cos(limit))`` -> ``~(g_z < -cos(limit))``; ``~(z >= min)`` -> ``~(z > min)``)

def test_a_tilt_equal_to_the_limit_angle_does_not_end_the_episode():
    limit = math.acos(0.5)  # 60 degrees: the gravity direction's base-frame z is -0.5 there
    gravity = torch.tensor([[0.0, math.sqrt(0.75), -0.5], [0.0, 0.9, -0.45], [0.0, 0.8, -0.6]])
    env = SimpleNamespace(robot=SimpleNamespace(projected_gravity_b=gravity))
    assert term.bad_orientation(env, limit).tolist() == [False, True, False]  # at, beyond, within


def test_a_base_exactly_at_the_minimum_height_does_not_end_the_episode():
    root = torch.tensor([[0.0, 0.0, 0.5], [0.0, 0.0, 0.49], [0.0, 0.0, 0.51]])
    env = SimpleNamespace(robot=SimpleNamespace(root_pos_w=root))
    assert term.base_height_below(env, 0.5).tolist() == [False, True, False]


# ---- sensor observation: the named sensor's own columns ----------------------------------------
# (mutant: ``sensordata[:, self.cols]`` -> ``sensordata[:, :3]``, the first sensor whatever the name)

def test_a_sensor_observation_reads_the_named_sensor_as_mujoco_computes_it(make_env):
    import mujoco
    from unilab.assets.g1_scene import build_g1_spec

    env = make_env(num_envs=2)
    robot = env.robot
    qpos, qvel = robot.qpos.clone(), robot.qvel.clone()
    a = robot.root_qpos_adr
    tilt = torch.tensor([math.cos(0.3), math.sin(0.3), 0.0, 0.0])  # 0.6 rad about x
    qpos[:, a + 3:a + 7] = tilt
    qvel[:, robot.root_qvel_adr + 3:robot.root_qvel_adr + 6] = torch.tensor([0.4, -0.2, 0.7])
    env.backend.set_state_where(torch.ones(2, dtype=torch.bool), qpos, qvel)
    robot.invalidate()
    got = {name: obs_terms.sensor(_cfg(name=name), env)(env) for name in ("imu_ang_vel", "imu_z_axis")}

    model = build_g1_spec().compile()
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos[0].double().numpy(), qvel[0].double().numpy()
    mujoco.mj_forward(model, data)
    for name, value in got.items():
        expected = torch.tensor(data.sensor(name).data, dtype=torch.float32).expand(2, -1)
        torch.testing.assert_close(value, expected, rtol=1e-4, atol=1e-4)


# ---- reset_joints_offset: joints kept inside their range, velocity offsets drawn in range --------
# (mutants: the clamp into the joint range dropped; the velocity draw's width taken as its high end)

def _reset_txn(env):
    rows = torch.ones(env.num_envs, dtype=torch.bool)
    return StateTransaction(rows, ~rows, env.default_qpos.expand(env.num_envs, -1).clone(),
                            env.default_qvel.expand(env.num_envs, -1).clone(), env.robot.qvel.clone())


@pytest.fixture
def walk_env(make_env):
    return make_env()


def test_a_joint_offset_beyond_the_range_leaves_each_joint_at_its_limit(walk_env):
    env, robot = walk_env, walk_env.robot
    lo, hi = robot.joint_limits[:, 0], robot.joint_limits[:, 1]
    for offset, limit in ((5.0, hi), (-5.0, lo)):  # more than any G1 joint's whole range
        txn = _reset_txn(env)
        ev.reset_joints_offset(env, txn, position_range=(offset, offset))
        assert torch.equal(txn.reset_qpos[:, robot.joint_qpos_index], limit.expand(N, -1))
        assert torch.equal(txn.reset_qpos[:, :7], env.default_qpos[:7].expand(N, -1))  # the base untouched


def test_joint_velocity_offsets_are_drawn_within_the_velocity_range(walk_env):
    env, robot = walk_env, walk_env.robot
    txn = _reset_txn(env)
    ev.reset_joints_offset(env, txn, position_range=(0.0, 0.0), velocity_range=(0.5, 0.5))
    assert torch.equal(txn.reset_qvel[:, robot.joint_qvel_index], torch.full((N, 29), 0.5))
    assert torch.equal(txn.reset_qvel[:, :6], torch.zeros(N, 6))
    txn = _reset_txn(env)
    ev.reset_joints_offset(env, txn, position_range=(0.0, 0.0), velocity_range=(0.2, 0.6))
    v = txn.reset_qvel[:, robot.joint_qvel_index]
    assert v.min() >= 0.2 and v.max() <= 0.6 and v.max() - v.min() > 0.3  # spread over the range


# ---- push_by_velocity: only the rows where it fired, each axis into its own qvel column ----------
# (mutants: the push added to every row, not only ``txn.rows``; roll and yaw swapped in the key order)

def test_a_push_moves_only_the_rows_where_it_fired(walk_env):
    env = walk_env
    push = ev.push_by_velocity(_cfg(velocity_range={"x": (0.5, 0.5)}), env)
    txn = _reset_txn(env)
    before = txn.qvel.clone()
    txn.rows = torch.tensor([True, False, True, False])
    push(env, txn)
    a = env.robot.root_qvel_adr
    delta = txn.qvel - before
    assert torch.allclose(delta[:, a], torch.tensor([0.5, 0.0, 0.5, 0.0]))
    delta[:, a] = 0.0
    assert torch.equal(delta, torch.zeros_like(delta))


@pytest.mark.parametrize(("axis", "column"), [("x", 0), ("y", 1), ("z", 2), ("roll", 3), ("pitch", 4), ("yaw", 5)])
def test_each_push_axis_lands_in_its_free_joint_velocity_column(walk_env, axis, column):
    env = walk_env
    push = ev.push_by_velocity(_cfg(velocity_range={axis: (0.3, 0.3)}), env)
    txn = _reset_txn(env)
    before = txn.qvel.clone()
    txn.rows = torch.ones(N, dtype=torch.bool)
    push(env, txn)
    expected = torch.zeros_like(before)
    expected[:, env.robot.root_qvel_adr + column] = 0.3
    torch.testing.assert_close(txn.qvel - before, expected)


# ---- randomize_friction: the sliding coefficient only, of the named geoms only ----------------------
# (mutants: every friction column scaled (torsional and rolling too); ``params.geoms`` ignored)

def _all_rows_txn(env, rows):
    txn = _reset_txn(env)
    txn.rows = torch.as_tensor(rows)
    return txn


def test_friction_randomization_scales_the_sliding_coefficient_and_keeps_the_others(walk_env):
    env = walk_env
    default = env.backend.model_field("geom_friction").clone()
    term = ev.randomize_friction(_cfg(range=(2.0, 2.0)), env)
    term(env, _all_rows_txn(env, [True, True, False, True]))
    after = env.backend.model_field("geom_friction")
    expected = default.clone()
    expected[[0, 1, 3], :, 0] *= 2.0
    torch.testing.assert_close(after, expected)
    assert (default[..., 1:] != 0).any()  # the torsional/rolling columns are not trivially zero


def test_friction_randomization_of_named_geoms_leaves_the_other_geoms(walk_env):
    env = walk_env
    default = env.backend.model_field("geom_friction").clone()
    term = ev.randomize_friction(_cfg(range=(0.5, 0.5), geoms=[0, 2]), env)
    term(env, _all_rows_txn(env, [True] * N))
    after = env.backend.model_field("geom_friction")
    expected = default.clone()
    expected[:, [0, 2], 0] *= 0.5
    torch.testing.assert_close(after, expected)


# ---- randomize_body_mass: a factor on the named bodies' masses, on the rows of txn.rows --------------
# (mutant: ``mass * factor`` -> ``mass + factor``)

def test_mass_randomization_multiplies_the_named_bodies_masses(walk_env):
    env = walk_env
    default = env.backend.model_field("body_mass").clone()
    torso, pelvis = (env.robot.body_index(b, "test") for b in ("torso_link", "pelvis"))
    term = ev.randomize_body_mass(_cfg(bodies=["torso_link", "pelvis"], range=(3.0, 3.0)), env)
    term(env, _all_rows_txn(env, [True, False, True, True]))
    expected = default.clone()
    expected[[0, 2, 3], torso] *= 3.0
    expected[[0, 2, 3], pelvis] *= 3.0
    torch.testing.assert_close(env.backend.model_field("body_mass"), expected)


# ---- randomize_com: the centre of mass moves by the drawn offset, in its sign ----------------------
# (mutant: ``ipos + offset`` -> ``ipos - offset``; the existing test draws from symmetric ranges)

def test_a_centre_of_mass_offset_moves_the_body_ipos_by_it(walk_env):
    env = walk_env
    default = env.backend.model_field("body_ipos").clone()
    torso = env.robot.body_index("torso_link", "test")
    term = ev.randomize_com(_cfg(bodies=["torso_link"], offset_range={"x": (0.01, 0.01), "z": (0.02, 0.02)}), env)
    term(env, _all_rows_txn(env, [True] * N))
    expected = default.clone()
    expected[:, torso] += torch.tensor([0.01, 0.0, 0.02])
    torch.testing.assert_close(env.backend.model_field("body_ipos"), expected)
