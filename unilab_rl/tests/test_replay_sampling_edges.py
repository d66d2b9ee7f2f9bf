"""Replay-buffer edges: validity masks and terminations across overwritten and quarantined slots,
the n-step and capacity limits, and which env's window each sampled row reads. Each test names the
small change to ``replay.py`` it fails on; expected values are worked out by hand from the
docstring's n-step rules (gamma = 0.5, so every sum is exact in binary)."""

from __future__ import annotations

import pytest
import torch
from unilab_rl.replay import ReplayBuffer

GAMMA = 0.5
CPU = torch.device("cpu")


def _buffer(num_envs=1, capacity=8, n_step=2, obs_dtype=torch.float32):
    return ReplayBuffer(num_envs, capacity, {"policy": 1}, 1, n_step, GAMMA, CPU, obs_dtype)


def _add(buffer, t, reward, terminated=False, truncated=False, valid=None):
    """One step of a one-env buffer: obs = t, next_obs = t + 0.5."""
    buffer.add({"policy": torch.tensor([[float(t)]])}, torch.zeros(1, 1), torch.tensor([float(reward)]),
               {"policy": torch.tensor([[t + 0.5]])}, torch.tensor([terminated]), torch.tensor([truncated]),
               None if valid is None else torch.tensor([valid]))


def _rows_starting_at(batch, t):
    rows = batch.obs["policy"][:, 0] == t
    assert rows.any(), f"step {t} was not sampled"
    return rows


# ---- a slot overwritten by the ring forgets what the old step was -----------------------------

def test_steps_stored_without_a_mask_are_valid_even_in_a_slot_that_held_a_quarantined_step():
    # (mutant: ``self.valid[i].fill_(True)`` dropped: a step added with ``valid=None`` keeps the
    # slot's old flag, and the 2x oversampling pushes such steps out in favour of valid ones)
    buffer = _buffer(capacity=4, n_step=1)
    _add(buffer, 0, 1.0, valid=False)
    _add(buffer, 1, 2.0, valid=True)
    for t in (2, 3, 4):  # step 4 reuses step 0's slot
        _add(buffer, t, 2.0**t)
    generator = torch.Generator().manual_seed(0)
    starts = torch.cat([buffer.sample(8, generator=generator).obs["policy"][:, 0] for _ in range(100)])
    assert set(starts.tolist()) == {1.0, 2.0, 3.0, 4.0}
    for t in (1.0, 2.0, 3.0, 4.0):  # uniform over the four valid steps
        assert abs((starts == t).float().mean().item() - 0.25) < 0.07, t


def test_a_termination_stored_in_a_slot_does_not_outlive_the_step_that_overwrites_it():
    # (mutants: ``window_end[i].copy_(...)`` -> ``window_end[i] |= ...``;
    #           ``terminated[i].copy_(...)`` -> ``terminated[i] |= ...``)
    buffer = _buffer(capacity=3, n_step=2)
    _add(buffer, 0, 1.0, terminated=True)
    for t in (1, 2, 3, 4):  # step 3 reuses step 0's slot, step 4 step 1's
        _add(buffer, t, 2.0**t)
    batch = buffer.sample(256, generator=torch.Generator().manual_seed(1))
    rows = _rows_starting_at(batch, 3.0)
    # a full two-step window: r3 + gamma * r4, bootstrapped from step 4's next observation
    assert (batch.reward[rows] == 8.0 + GAMMA * 16.0).all()
    assert (batch.discount[rows] == GAMMA**2).all()
    assert (batch.next_obs["policy"][rows, 0] == 4.5).all()


# ---- a quarantined row that slips through the oversampling is not read through ---------------

def test_a_quarantined_row_that_is_sampled_anyway_does_not_sum_its_successor():
    # (mutant: ``self.window_end[i] |= invalid`` dropped). With most rows quarantined, invalid
    # rows reach the batch through the 2x oversampling (documented in ``sample``); the window
    # of one must still end at itself.
    buffer = _buffer(capacity=4, n_step=2)
    for t in range(3):
        _add(buffer, t, 2.0**t, valid=False)
    _add(buffer, 3, 8.0)
    batch = buffer.sample(64, generator=torch.Generator().manual_seed(0))
    rows = _rows_starting_at(batch, 2.0)
    assert (batch.reward[rows] == 4.0).all()  # not 4 + 0.5 * 8
    assert (batch.discount[rows] == GAMMA).all()
    assert (batch.next_obs["policy"][rows, 0] == 2.5).all()


# ---- construction limits ------------------------------------------------------------------------

def test_a_ring_exactly_n_steps_long_is_accepted_and_gives_full_windows():
    # (mutant: ``capacity_per_env < n_step`` -> ``<=``)
    buffer = _buffer(capacity=2, n_step=2)
    _add(buffer, 0, 1.0)
    _add(buffer, 1, 2.0)
    batch = buffer.sample(64, generator=torch.Generator().manual_seed(0))
    rows = _rows_starting_at(batch, 0.0)
    assert (batch.reward[rows] == 1.0 + GAMMA * 2.0).all() and (batch.discount[rows] == GAMMA**2).all()


@pytest.mark.parametrize(("n_step", "capacity"), [(0, 4), (-1, 4), (3, 2)])
def test_an_n_step_below_one_or_above_the_capacity_is_refused(n_step, capacity):
    # (mutant: ``n_step < 1`` -> ``n_step < 0``)
    with pytest.raises(ValueError, match="need n_step >= 1 and capacity_per_env >= n_step"):
        _buffer(capacity=capacity, n_step=n_step)


def test_excluding_the_next_write_from_a_one_step_ring_is_refused_by_name():
    # (mutant: the ``size < 2`` check dropped: torch's randint then fails with an unrelated error)
    buffer = _buffer(capacity=1, n_step=1)
    _add(buffer, 0, 1.0)
    with pytest.raises(RuntimeError, match="exclude_next_write needs a replay capacity of at least 2"):
        buffer.sample(4, exclude_next_write=True)


# ---- every env is sampled, each row from its own env ------------------------------------------

def test_every_env_is_sampled_and_each_row_reads_its_own_envs_window():
    # (mutant: the env index drawn from ``num_envs - 1`` envs)
    num_envs = 3
    buffer = _buffer(num_envs=num_envs, capacity=4, n_step=2)
    envs = torch.arange(num_envs, dtype=torch.float32)
    for t in range(3):
        # env e at step t: obs 10 e + t, reward 2^t (e + 1); env 2 terminates at step 0
        buffer.add({"policy": (10 * envs + t)[:, None]}, envs[:, None], (envs + 1) * 2.0**t,
                   {"policy": (10 * envs + t + 0.5)[:, None]}, torch.tensor([t == 0 and e == 2 for e in range(3)]),
                   torch.zeros(num_envs, dtype=torch.bool))
    batch = buffer.sample(512, generator=torch.Generator().manual_seed(0))
    env = torch.div(batch.obs["policy"][:, 0], 10, rounding_mode="floor")
    assert set(env.tolist()) == {0.0, 1.0, 2.0}
    assert torch.equal(batch.action[:, 0], env)
    step0 = batch.obs["policy"][:, 0] == 10 * env
    for e in range(num_envs):
        rows = step0 & (env == e)
        assert rows.any()
        if e == 2:  # terminated: one step, no bootstrap
            assert (batch.reward[rows] == 3.0).all() and (batch.discount[rows] == 0.0).all()
        else:
            assert (batch.reward[rows] == (e + 1) * (1 + GAMMA * 2)).all()
            assert (batch.discount[rows] == GAMMA**2).all()
            assert (batch.next_obs["policy"][rows, 0] == 10 * e + 1.5).all()


# ---- bfloat16 storage comes back as float32 ---------------------------------------------------

def test_observations_stored_as_bfloat16_are_sampled_as_float32():
    # (mutants: ``.float()`` dropped from the sampled obs or next_obs)
    buffer = _buffer(capacity=4, n_step=1, obs_dtype=torch.bfloat16)
    third = torch.tensor([[1.0 / 3.0]])
    buffer.add({"policy": third}, torch.zeros(1, 1), torch.ones(1), {"policy": -third},
               torch.tensor([False]), torch.tensor([False]))
    batch = buffer.sample(4, generator=torch.Generator().manual_seed(0))
    assert batch.obs["policy"].dtype == torch.float32 and batch.next_obs["policy"].dtype == torch.float32
    rounded = third.to(torch.bfloat16).float()
    assert rounded.item() != third.item()  # storage really is bfloat16
    assert (batch.obs["policy"] == rounded).all() and (batch.next_obs["policy"] == -rounded).all()
