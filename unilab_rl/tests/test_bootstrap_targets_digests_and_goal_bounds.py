"""The replay window after a time-out, the distributional soft target (pessimistic member, entropy
sign), checkpoint digests, the collector's zeros for a non-finite final observation, and goals met
at exactly their threshold. Each test fails on one small, deliberate change to the code it names
(recorded beside it) and passes on the code as written."""

from __future__ import annotations

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.checkpoint import (
    CHECKPOINT_FORMAT,
    INTEGRITY_KEY,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
    state_digests,
)
from unilab_rl.collector import Collector
from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION, EnvSpec
from unilab_rl.goals import Goal
from unilab_rl.networks.distributional import pessimistic_soft_target, soft_target_atoms
from unilab_rl.replay import ReplayBuffer
from unilab_rl.timing import SampledPhaseTimer

GAMMA = 0.5


# ---- replay: a termination after the window has ended must not remove its bootstrap ----------
# (mutant: ``terminated |= self.terminated[index, env]`` without ``take``)

def test_a_termination_right_after_a_time_out_does_not_reach_back_into_the_time_outs_window():
    buffer = ReplayBuffer(1, 8, {"policy": 1}, 1, 3, GAMMA, torch.device("cpu"))
    for t, (term, trunc) in enumerate([(False, True), (True, False), (False, False)]):
        buffer.add({"policy": torch.tensor([[float(t)]])}, torch.zeros(1, 1), torch.tensor([2.0 ** t]),
                   {"policy": torch.tensor([[t + 0.5]])}, torch.tensor([term]), torch.tensor([trunc]))
    batch = buffer.sample(256, generator=torch.Generator().manual_seed(0))
    rows = batch.obs["policy"][:, 0] == 0.0
    assert rows.any()
    # Step 0 timed out: its window is step 0 alone and bootstraps from its final observation,
    # whatever the next episode (step 1, a fall) did.
    assert torch.equal(batch.reward[rows], torch.full((int(rows.sum()),), 1.0))
    assert torch.allclose(batch.discount[rows], torch.full((int(rows.sum()),), GAMMA))
    assert (batch.next_obs["policy"][rows, 0] == 0.5).all()


# ---- distributional target: the pessimistic member and the sign of the entropy term ----------
# (mutants: ``argmin`` -> ``argmax``; ``z - alpha log pi`` -> ``z + alpha log pi``)

def test_the_target_takes_the_ensemble_member_with_the_lowest_mean():
    support = torch.linspace(-1.0, 1.0, 3)
    low, high = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 1.0])
    next_probs = torch.stack((torch.stack((high, low)), torch.stack((low, high))))  # (E=2, B=2, K=3)
    zero = torch.zeros(2)
    target = pessimistic_soft_target(next_probs, support, zero, torch.ones(2), zero, -1.0, 1.0)
    assert torch.equal(target, torch.stack((low, low)))


def test_the_soft_target_subtracts_the_entropy_bonus_from_the_next_value():
    support = torch.linspace(-2.0, 2.0, 5)
    atoms = soft_target_atoms(support, torch.tensor([0.5]), torch.tensor([0.9]), torch.tensor([0.3]))
    assert torch.allclose(atoms, 0.5 + 0.9 * (support - 0.3)[None])


# ---- checkpoint integrity ---------------------------------------------------------------------

def _payload() -> dict:
    return {"task": "t", "backend": "mujoco", "env_overrides": {}, "algo": "fastsac", "algo_config": {},
            "spec": {}, "agent": {"w": torch.arange(4, dtype=torch.float32)}, "counters": {"env_steps": 3},
            "rng": {}, "env": {}}


@pytest.mark.parametrize("change", ["dtype", "shape"])
def test_a_tensor_read_back_with_another_dtype_or_shape_over_the_same_bytes_is_refused(tmp_path, change):
    # (mutant: the tensor digest without its dtype and shape header)
    save_checkpoint(tmp_path / "c.pt", _payload())
    document = torch.load(tmp_path / "c.pt", weights_only=True)
    w = document["agent"]["w"]
    document["agent"]["w"] = w.view(torch.int32) if change == "dtype" else w.view(2, 2)
    torch.save(document, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match=r"edited.pt is damaged: agent\.w do not match the digests"):
        load_checkpoint(tmp_path / "edited.pt")


@pytest.mark.parametrize("record", ["emptied", "one part dropped"])
def test_a_digest_record_missing_parts_does_not_vouch_for_them(tmp_path, record):
    # (mutant: ``digests.keys() | written.keys()`` -> ``&``: a part without a written digest goes unchecked)
    save_checkpoint(tmp_path / "c.pt", _payload())
    document = torch.load(tmp_path / "c.pt", weights_only=True)
    digests = document[INTEGRITY_KEY]["digests"]
    document[INTEGRITY_KEY]["digests"] = {} if record == "emptied" else {k: v for k, v in digests.items()
                                                                         if k != "agent.w"}
    document["agent"]["w"][1] = 7.0
    torch.save(document, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match=r"edited.pt is damaged: .*agent\.w"):
        load_checkpoint(tmp_path / "edited.pt")


def test_a_format_2_checkpoint_is_checked_against_its_digests(tmp_path):
    # (mutant: ``format_version >= 2`` -> ``> 2``: version 2 files read unchecked)
    document = {"format": CHECKPOINT_FORMAT, "format_version": 2, "contract_version": ENV_RUNNER_CONTRACT_VERSION,
                **{k: v for k, v in _payload().items() if k != "env"}}
    document[INTEGRITY_KEY] = {"algorithm": "sha256", "digests": state_digests(document)[0]}
    torch.save(document, tmp_path / "v2.pt")
    assert load_checkpoint(tmp_path / "v2.pt")["format_version"] == 2  # intact: read
    document["agent"]["w"][1] = 7.0
    torch.save(document, tmp_path / "v2_damaged.pt")
    with pytest.raises(CheckpointError, match=r"v2_damaged.pt is damaged: agent\.w do not match"):
        load_checkpoint(tmp_path / "v2_damaged.pt")


# ---- collector: a quarantined row that ended is stored with zeros, not its final observation ----
# (mutant: the bootstrap observation taken from ``final_obs`` for every done row, finite or not)

def test_a_done_row_with_a_non_finite_final_observation_is_stored_with_zeros():
    env = PointMassEnv(num_envs=2, max_episode_length=1)  # every row times out every step
    real_step = env.step

    def step(action):
        obs, reward, terminated, truncated, info = real_step(action)
        info["final_obs"]["critic"][1, 0] = float("nan")
        return obs, reward, terminated, truncated, info

    env.step = step
    torch.manual_seed(0)
    _, _, agent = tiny_agent("fastsac", env=env)
    spec = EnvSpec.from_env(env)
    replay = ReplayBuffer(2, 4, spec.observation_spec, spec.action_dim, 1, GAMMA, spec.device)
    collector = Collector(env, spec, agent, replay, SampledPhaseTimer(spec.device, sample_every=10**6))
    collector.step()
    assert replay.valid[0].tolist() == [True, False] and int(collector.quarantined_rows) == 1
    for group in spec.observation_spec:
        assert torch.equal(replay.next_obs[group][0, 1], torch.zeros(spec.observation_spec[group]))
        assert torch.isfinite(replay.next_obs[group][0, 0]).all() and replay.next_obs[group][0, 0].abs().sum() > 0


# ---- goals: the inclusive comparisons are inclusive -------------------------------------------
# (mutant: ``"<=": operator.lt``)

@pytest.mark.parametrize(("text", "value", "met"), [("m<=0.5", 0.5, True), ("m<0.5", 0.5, False),
                                                    ("m>=0.5", 0.5, True), ("m>0.5", 0.5, False)])
def test_a_goal_at_exactly_its_threshold_is_met_only_by_an_inclusive_comparison(text, value, met):
    assert Goal.parse(text).met(value) is met
