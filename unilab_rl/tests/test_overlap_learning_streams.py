"""Learning beside collection (overlap_learning): what a host test can show of the stream
hazards the runner must avoid. There are no CUDA streams in CI; the learner stream is swapped
for a recorder with LearnerStream's calls (``helpers.RecordingStream``, as tests/test_learner_stream.py uses).
"""

from __future__ import annotations

import weakref

import torch
from fake_env import PointMassEnv
from helpers import RecordingStream, tiny_agent
from unilab_rl.runner import LOSS_METRIC_PREFIX, OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig


class GraphLikeAgent:
    """Wraps a real agent; ``update`` returns the same output tensors every call, overwritten
    in place, as a CUDA-graphed update's metrics are (valid until the next call). Logs act."""

    def __init__(self, agent, log: list[str]) -> None:
        self.agent, self.log = agent, log
        self.outputs: dict[str, torch.Tensor] = {}
        self.returned: list[dict[str, float]] = []

    def act(self, obs, deterministic):
        self.log.append("act")
        return self.agent.act(obs, deterministic)

    def update(self, batch):
        metrics = self.agent.update(batch)
        for key, value in metrics.items():
            if key in self.outputs:
                self.outputs[key].copy_(value)
            else:
                self.outputs[key] = value.detach().clone()
        self.returned.append({key: float(value) for key, value in metrics.items()})
        return {key: self.outputs[key] for key in metrics}

    def __getattr__(self, name):
        return getattr(self.agent, name)


def runner_with_recorders(monkeypatch, overlap: bool, seed: int = 0):
    log: list[str] = []
    monkeypatch.setattr("unilab_rl.runner.LearnerStream",
                        lambda device, env_priority: RecordingStream(device, log, env_priority))
    torch.manual_seed(seed)
    env, config, agent = tiny_agent("fastsac", env=PointMassEnv(num_envs=4, seed=seed), learning_starts=0,
                                    batch_size=8, replay_capacity_per_env=4, n_step=1)
    original_step = env.step

    def logged_step(action):
        log.append("env.step")
        return original_step(action)

    env.step = logged_step
    wrapped = GraphLikeAgent(agent, log)
    runner = OffPolicyRunner(env, wrapped, config, RunIdentity("point_mass", "fake", "fastsac", seed), None,
                             runner_config=RunnerConfig(overlap_learning=overlap, log_every=1000))
    return runner, wrapped, log


def test_loss_sums_pending_across_an_overlap_switch_are_added_to_in_place(monkeypatch):
    """A loss sum allocated on the env stream (sequential updates) and added to on the learner
    stream after ``set_overlap_learning(True)`` must not be freed when the add is issued: the
    caching allocator would give its memory to the env stream's next tensor, written by the env
    step running beside the updates before the learner stream's add reads it. The sums are
    updated in place and live until the flush reads them (after joining the learner stream)."""
    runner, agent, _ = runner_with_recorders(monkeypatch, overlap=False)
    for _ in range(3):  # learning from the 2nd iteration (a batch is 8 rows of 4 envs)
        runner.collector.step()
        runner.learn()
    assert runner.update_count > 0
    before = {key: weakref.ref(total) for key, total in runner.update_sums.items()}

    runner.set_overlap_learning(True)
    for _ in range(3):
        runner.collector.step()
        runner.learn()
    for key, ref in before.items():
        assert ref() is not None, f"the sum of {key} from before the switch was freed by an overlapped update"
        assert runner.update_sums[key] is ref(), key

    # And the sums are right although every update returned the same (overwritten) tensors.
    expected: dict[str, float] = {}
    for metrics in agent.returned:
        for key, value in metrics.items():
            expected[key] = expected.get(key, 0.0) + value
    count = runner.update_count
    logged = runner._flush(1.0)
    for key, total in expected.items():
        assert abs(logged[f"{LOSS_METRIC_PREFIX}{key}"] - total / count) <= 1e-5 * max(1.0, abs(total / count)), key


def test_a_restore_drops_the_action_computed_ahead_with_the_replaced_weights(monkeypatch):
    """With overlap_learning the collector computes step t+1's action at the end of step t. A
    restore replaces the weights that action came from: the next step must act afresh (with the
    restored weights, as it does with the setting off), not send the old policy's action."""
    runner, _, log = runner_with_recorders(monkeypatch, overlap=True, seed=0)
    other, _, _ = runner_with_recorders(monkeypatch, overlap=False, seed=1)
    runner.collector.step()
    assert runner.collector.next_action is not None
    runner.restore(other.checkpoint_payload())
    assert runner.collector.next_action is None
    assert runner.collector.wait_for_learner is not None, "the collector still acts ahead after the restore"
    log.clear()
    runner.collector.step()
    assert log[:2] == ["act", "env.step"], log
