"""Learning beside collection: what the learner stream orders, checked on the host.

There are no CUDA streams in CI; these tests swap the stream for a recorder with the same
three calls, so they check the order the runner and the collector issue work in (which is
what makes the two streams safe), the policy's staleness, and the replay's excluded slot.
The GPU speed is a benchmark (unilab-bench collector), not a test.
"""

from __future__ import annotations

import pytest
import torch
from fake_env import PointMassEnv
from helpers import RecordingStream, tiny_agent
from unilab_rl.learner_stream import LearnerStream
from unilab_rl.replay import ReplayBuffer
from unilab_rl.runner import OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig


class RecordingAgent:
    """Wraps a real agent: logs act/observe/update and which update count each act saw."""

    def __init__(self, agent, log: list[str], stream_box: list) -> None:
        self.agent, self.log, self.stream_box = agent, log, stream_box
        self.updates_seen_by_act: list[int] = []
        self.updates_done = 0

    def act(self, obs, deterministic):
        self.log.append("act")
        self.updates_seen_by_act.append(self.updates_done)
        return self.agent.act(obs, deterministic)

    def observe(self, *args):
        self.log.append("observe")
        return self.agent.observe(*args)

    def update(self, batch):
        stream = self.stream_box[0] if self.stream_box else None
        self.log.append("update on learner stream" if stream is not None and stream.inside else "update")
        self.updates_done += 1
        return self.agent.update(batch)

    def __getattr__(self, name):
        return getattr(self.agent, name)


def recording_runner(monkeypatch, overlap: bool, **runner_settings):
    log: list[str] = []
    box: list = []

    def make_stream(device, env_priority):
        box.append(RecordingStream(device, log, env_priority))
        return box[-1]

    monkeypatch.setattr("unilab_rl.runner.LearnerStream", make_stream)
    env, config, agent = tiny_agent("fastsac", env=PointMassEnv(num_envs=4), learning_starts=0, batch_size=8,
                                    replay_capacity_per_env=4, n_step=1)
    recorder = RecordingAgent(agent, log, box)
    runner = OffPolicyRunner(env, recorder, config, RunIdentity("point_mass", "fake", "fastsac", 0), None,
                             runner_config=RunnerConfig(overlap_learning=overlap, **runner_settings))
    return runner, recorder, log


def test_overlapped_learning_acts_ahead_and_orders_both_streams(monkeypatch):
    runner, recorder, log = recording_runner(monkeypatch, overlap=True)
    for _ in range(4):  # learning starts at the 2nd iteration (a batch is 8 rows of 4 envs)
        runner.collect_and_learn()
    # Per learning iteration, all of it issued on the env stream: the learner waits for the
    # env, updates on its stream; the next collector step waits for those updates before the
    # agent observes and acts ahead; the caller's stream waits for the env stream.
    iteration = ["collect on env stream", "env waits for updates", "observe", "act", "learner waits for env",
                 "update on learner stream", "updates recorded", "caller waits for env stream"]
    first = log.index("learner waits for env") - 4
    assert log[first:] == iteration * 3
    # Acts for steps 1..5 (the 5th computed ahead at the end of step 4). One update round
    # stale: the action of step 4 was computed before step 3's update (sequential: after it).
    assert recorder.updates_seen_by_act == [0, 0, 0, 1, 2]
    runner._flush(1.0)
    assert "join" in log[-1:], "the loss sums are read only after joining the learner stream"


def test_sequential_learning_acts_with_every_update_issued(monkeypatch):
    runner, recorder, log = recording_runner(monkeypatch, overlap=False)
    for _ in range(4):
        runner.collector.step()
        runner.learn()
    assert "learner waits for env" not in log and "env waits for updates" not in log
    assert recorder.updates_seen_by_act == [0, 0, 1, 2]  # steps 1..4: step 3 acts after the first update
    assert log[:4] == ["act", "observe", "act", "observe"]


def test_switching_overlap_off_drops_the_action_computed_ahead(monkeypatch):
    runner, recorder, log = recording_runner(monkeypatch, overlap=True)
    runner.collector.step()
    assert runner.collector.next_action is not None
    runner.set_overlap_learning(False)
    assert runner.collector.next_action is None and runner.learner_stream is None
    assert log[-1] == "join", "switching off joins the learner stream first"
    acts = len(recorder.updates_seen_by_act)
    runner.collector.step()
    assert len(recorder.updates_seen_by_act) == acts + 1, "the next step acts afresh"
    assert runner.config.overlap_learning is False


def test_the_env_stream_gets_the_configured_priority(monkeypatch):
    runner, recorder, log = recording_runner(monkeypatch, overlap=True)
    assert recorder.stream_box[-1].env_priority == -5, "by default collection goes first"
    runner.config.env_stream_priority = 0
    runner.set_overlap_learning(True)  # new streams: a stream's priority is fixed at its creation
    assert recorder.stream_box[-1].env_priority == 0 and runner.learner_stream is recorder.stream_box[-1]
    with pytest.raises(ValueError, match="env_stream_priority"):
        RunnerConfig(env_stream_priority=1)


def test_overlap_on_the_host_is_refused_with_the_setting_named():
    with pytest.raises(ValueError, match="overlap_learning=true needs a CUDA device"):
        LearnerStream(torch.device("cpu"), env_priority=-5)
    env, config, agent = tiny_agent("fastsac")
    with pytest.raises(ValueError, match="overlap_learning"):
        OffPolicyRunner(env, agent, config, RunIdentity("point_mass", "fake", "fastsac", 0), None,
                        runner_config=RunnerConfig(overlap_learning=True))


def filled_replay(capacity: int = 4, num_envs: int = 3) -> ReplayBuffer:
    """A full ring whose reward is the step index it was written at (0 .. capacity + 1)."""
    replay = ReplayBuffer(num_envs, capacity, {"policy": 1}, 1, 1, 0.99, torch.device("cpu"))
    for step in range(capacity + 2):
        obs = {"policy": torch.zeros(num_envs, 1)}
        replay.add(obs, torch.zeros(num_envs, 1), torch.full((num_envs,), float(step)), obs,
                   torch.zeros(num_envs, dtype=torch.bool), torch.zeros(num_envs, dtype=torch.bool))
    return replay


def test_a_learner_beside_collection_never_samples_the_slot_the_next_write_takes():
    replay = filled_replay()
    oldest = 2.0  # steps 0 and 1 were overwritten; the next add overwrites step 2's slot
    generator = torch.Generator().manual_seed(0)
    excluded = replay.sample(512, generator=generator, exclude_next_write=True).reward
    assert oldest not in excluded.tolist() and set(excluded.tolist()) == {3.0, 4.0, 5.0}
    plain = replay.sample(512, generator=generator).reward
    assert oldest in plain.tolist(), "without the exclusion the oldest slot is sampled"
    # the runner draws an env step's batches together; the exclusion holds for every one of them
    for batch in replay.sample_batches(256, 4, generator=generator, exclude_next_write=True):
        assert set(batch.reward.tolist()) == {3.0, 4.0, 5.0}


def test_the_exclusion_leaves_a_ring_that_is_not_full_unchanged():
    replay = ReplayBuffer(2, 8, {"policy": 1}, 1, 1, 0.99, torch.device("cpu"))
    for step in range(3):
        obs = {"policy": torch.zeros(2, 1)}
        replay.add(obs, torch.zeros(2, 1), torch.full((2,), float(step)), obs,
                   torch.zeros(2, dtype=torch.bool), torch.zeros(2, dtype=torch.bool))
    rewards = replay.sample(256, generator=torch.Generator().manual_seed(1), exclude_next_write=True).reward
    assert set(rewards.tolist()) == {0.0, 1.0, 2.0}
