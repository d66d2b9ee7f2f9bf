"""g1_walk_flat reads foot contact from the simulator's contact forces; g1_walk_flat_height_proxy is its named fallback."""

from __future__ import annotations

import pytest
import torch

N = 4
STILL = ["events.reset_joints=None", "events.push=None"]


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_the_standing_g1_has_both_feet_in_contact_carrying_its_weight(make_env, backend):
    env = make_env(task="g1_walk_flat", backend=backend, num_envs=N, overrides=STILL)
    feet = env.sensor("feet", "test")
    zero = torch.zeros(N, env.action_dim)
    for _ in range(8):
        env.step(zero)
    assert feet.contact.all()
    assert torch.all(feet.air_time == 0) and torch.all(feet.contact_time > 0)
    weight = float(env.backend.model_field("body_mass").sum()) * 9.81 / N  # (N, nbody) masses, one row per env
    normal = env.robot.contact("feet", "test").force_w[..., 2].sum(dim=1)
    assert torch.allclose(normal, torch.full((N,), weight), rtol=0.3), (normal, weight)
    critic = env.observation_manager.describe()["critic"]
    assert critic["feet_contact"] == 6  # flags, air and contact time of two feet


def test_a_reset_row_reads_no_contact_until_its_first_step(make_env):
    env = make_env(task="g1_walk_flat", num_envs=N, overrides=STILL)
    feet = env.sensor("feet", "test")
    zero = torch.zeros(N, env.action_dim)
    for _ in range(4):
        env.step(zero)
    env.episode_length[0] = env.max_episode_length - 1  # row 0 times out at the next step
    env.step(zero)
    assert feet.contact[0].tolist() == [False, False] and feet.contact[1:].all()
    assert torch.all(feet.contact_time[0] == 0)


def test_the_height_proxy_is_a_named_variant_that_asks_for_no_contact_sensing(make_env):
    from unilab.tasks.velocity.mdp.sensors import FeetContact

    env = make_env(task="g1_walk_flat_height_proxy", num_envs=N, overrides=STILL)
    assert isinstance(env.sensor("feet", "test"), FeetContact)
    assert env.backend.views().contacts == {}
    zero = torch.zeros(N, env.action_dim)
    for _ in range(8):
        env.step(zero)
    assert env.sensor("feet", "test").contact.all()  # standing: both ankles below the proxy height
