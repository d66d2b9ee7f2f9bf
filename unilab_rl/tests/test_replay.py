import pytest
import torch
from unilab_rl.replay import ReplayBuffer, map_batch

GAMMA = 0.5


def make_buffer(n_step=3, capacity=8, num_envs=1):
    return ReplayBuffer(num_envs, capacity, {"policy": 1, "critic": 1}, 1, n_step, GAMMA, torch.device("cpu"))


def add_steps(buffer, rewards, terminated=(), truncated=(), valid=None):
    """Step t stores obs=t, next_obs=t+0.5 (so tests can see which step was bootstrapped)."""
    for t, r in enumerate(rewards):
        obs = {"policy": torch.tensor([[float(t)]]), "critic": torch.tensor([[float(t)]])}
        nxt = {"policy": torch.tensor([[t + 0.5]]), "critic": torch.tensor([[t + 0.5]])}
        buffer.add(obs, torch.zeros(1, 1), torch.tensor([r]), nxt,
                   torch.tensor([t in terminated]), torch.tensor([t in truncated]),
                   None if valid is None else torch.tensor([valid[t]]))


def sample_start(buffer, start_obs, batch_size=64):
    batch = buffer.sample(batch_size)
    rows = batch.obs["policy"][:, 0] == start_obs
    assert rows.any(), "start step was not sampled"
    first = rows.nonzero()[0, 0]
    return batch.reward[first].item(), batch.discount[first].item(), batch.next_obs["policy"][first, 0].item()


def test_full_window_sums_n_discounted_rewards_and_bootstraps_from_step_t_plus_n_minus_1():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0, 8.0, 16.0])
    torch.manual_seed(0)
    reward, discount, next_obs = sample_start(buffer, 0.0, 256)
    assert reward == pytest.approx(1 + 0.5 * 2 + 0.25 * 4)
    assert discount == pytest.approx(GAMMA**3)
    assert next_obs == 2.5


def test_termination_stops_the_window_and_removes_the_bootstrap():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0, 8.0], terminated={1})
    torch.manual_seed(1)
    reward, discount, next_obs = sample_start(buffer, 0.0, 256)
    assert reward == pytest.approx(1 + 0.5 * 2)
    assert discount == 0.0
    assert next_obs == 1.5


def test_time_out_stops_the_window_but_bootstraps_from_the_final_observation():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0, 8.0], truncated={1})
    torch.manual_seed(2)
    reward, discount, next_obs = sample_start(buffer, 0.0, 256)
    assert reward == pytest.approx(1 + 0.5 * 2)
    assert discount == pytest.approx(GAMMA**2)
    assert next_obs == 1.5  # the pre-reset final obs stored for step 1


def test_window_is_cut_at_the_newest_stored_step():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0])
    torch.manual_seed(3)
    reward, discount, next_obs = sample_start(buffer, 1.0, 256)
    assert reward == pytest.approx(2 + 0.5 * 4)
    assert discount == pytest.approx(GAMMA**2)
    assert next_obs == 2.5


def test_ring_wraps_and_keeps_windows_in_time_order():
    buffer = make_buffer(n_step=2, capacity=4)
    add_steps(buffer, [1.0, 2.0, 4.0, 8.0, 16.0, 32.0])  # steps 0, 1 overwritten
    torch.manual_seed(4)
    batch = buffer.sample(256)
    assert set(batch.obs["policy"][:, 0].tolist()) == {2.0, 3.0, 4.0, 5.0}
    reward, discount, next_obs = sample_start(buffer, 3.0, 256)
    assert reward == pytest.approx(8 + 0.5 * 16)
    assert discount == pytest.approx(GAMMA**2)
    assert next_obs == 4.5


def test_quarantined_rows_are_never_sampled_and_cut_the_previous_window():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0, 8.0], valid=[True, True, False, True])
    torch.manual_seed(5)
    batch = buffer.sample(256)
    assert 2.0 not in batch.obs["policy"][:, 0].tolist()
    reward, discount, next_obs = sample_start(buffer, 0.0, 256)
    assert reward == pytest.approx(1 + 0.5 * 2)  # stops before the quarantined step
    assert next_obs == 1.5
    assert discount == pytest.approx(GAMMA**2)


def test_sampled_values_stay_finite_with_quarantined_rows():
    buffer = make_buffer(num_envs=1)
    add_steps(buffer, [1.0, float("nan"), 4.0], valid=[True, False, True])
    batch = buffer.sample(64)
    assert torch.isfinite(batch.reward).all()


@pytest.mark.parametrize("steps", [3, 6])
def test_stored_actions_come_back_oldest_first_before_and_after_the_ring_wraps(steps):
    buffer = make_buffer(n_step=1, capacity=4)
    for t in range(steps):
        obs = {"policy": torch.zeros(1, 1), "critic": torch.zeros(1, 1)}
        buffer.add(obs, torch.tensor([[float(t)]]), torch.zeros(1), obs, torch.tensor([False]), torch.tensor([False]))
    kept = list(range(max(0, steps - 4), steps))
    assert [a.item() for a in buffer.stored_actions()] == kept


def test_sample_batches_part_one_draw_into_distinct_batches_each_consistent_with_its_rows():
    buffer = ReplayBuffer(16, 32, {"policy": 1, "critic": 1}, 1, 1, GAMMA, torch.device("cpu"))
    for t in range(20):
        obs = {"policy": torch.full((16, 1), float(t)), "critic": torch.arange(16.0)[:, None]}
        nxt = {"policy": torch.full((16, 1), t + 0.5), "critic": torch.arange(16.0)[:, None]}
        buffer.add(obs, torch.full((16, 1), 10.0 * t), torch.full((16,), float(t)), nxt,
                   torch.zeros(16, dtype=torch.bool), torch.zeros(16, dtype=torch.bool))
    batches = buffer.sample_batches(48, 3, generator=torch.Generator().manual_seed(0))
    whole = buffer.sample(144, generator=torch.Generator().manual_seed(0))
    assert len(batches) == 3
    for k, batch in enumerate(batches):
        assert batch.reward.shape == (48,) and batch.obs["policy"].shape == (48, 1)
        step = batch.obs["policy"][:, 0]
        # every field of a row comes from the same stored step
        assert torch.equal(batch.reward, step) and torch.equal(batch.action[:, 0], 10.0 * step)
        assert torch.equal(batch.next_obs["policy"][:, 0], step + 0.5)
        assert torch.equal(batch.reward, whole.reward[48 * k:48 * (k + 1)])
    rows = [torch.stack([b.obs["policy"][:, 0], b.obs["critic"][:, 0]], 1) for b in batches]
    assert not torch.equal(rows[0], rows[1]) and not torch.equal(rows[1], rows[2])


def test_sample_batches_refuses_a_count_below_one_by_name():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0])
    with pytest.raises(ValueError, match="count must be >= 1, got 0"):
        buffer.sample_batches(4, 0)


def test_map_batch_applies_to_every_tensor_and_every_observation_group():
    buffer = make_buffer()
    add_steps(buffer, [1.0, 2.0, 4.0])
    batch = buffer.sample(8)
    cloned = map_batch(batch, torch.clone)  # what a CUDA graph's static inputs start from
    for name in ("action", "reward", "discount"):
        assert torch.equal(getattr(cloned, name), getattr(batch, name))
        assert getattr(cloned, name).data_ptr() != getattr(batch, name).data_ptr()
    for field in ("obs", "next_obs"):
        assert set(getattr(cloned, field)) == {"policy", "critic"}
        for group, tensor in getattr(cloned, field).items():
            assert torch.equal(tensor, getattr(batch, field)[group])
            assert tensor.data_ptr() != getattr(batch, field)[group].data_ptr()
