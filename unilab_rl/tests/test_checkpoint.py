import signal

import pytest
import torch
from fake_env import PointMassEnv
from helpers import tiny_agent
from unilab_rl.checkpoint import (
    CheckpointError,
    check_same_task,
    load_checkpoint,
    save_checkpoint,
)
from unilab_rl.runner import LearnerDiverged, OffPolicyRunner, RunIdentity
from unilab_rl.runner_config import RunnerConfig
from unilab_rl.snapshot_names import snapshot_name


def make_runner(algo, out_dir):
    env, config, agent = tiny_agent(algo, env=PointMassEnv(num_envs=8, seed=3))
    return OffPolicyRunner(env, agent, config, RunIdentity("fake_task", "none", algo, 0), out_dir,
                           runner_config=RunnerConfig(log_every=5, checkpoint_every=1000))


@pytest.mark.parametrize("algo", ["flashsac", "fastsac"])
def test_resume_gives_identical_next_losses(tmp_path, algo):
    original = make_runner(algo, tmp_path)
    original.train(max_env_steps=12 * 8)
    path = tmp_path / "checkpoint.pt"
    assert path.is_file()
    batch = original.replay.sample(32)

    document = load_checkpoint(path)
    resumed = make_runner(algo, None)
    resumed.restore(document)
    torch.set_rng_state(document["rng"]["torch"])
    expected = original.agent.update(batch)
    torch.set_rng_state(document["rng"]["torch"])
    got = resumed.agent.update(batch)
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    assert resumed.env_steps == original.env_steps and resumed.updates == original.updates


def test_corrupt_checkpoint_is_refused_with_a_clear_error(tmp_path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match="corrupt or not a unilab_rl checkpoint"):
        load_checkpoint(path)
    assert path.read_bytes() == b"not a checkpoint at all"


def test_foreign_torch_file_and_missing_file_are_refused(tmp_path):
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="not a unilab_rl checkpoint"):
        load_checkpoint(foreign)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")


def test_checkpoint_from_another_task_is_refused(tmp_path):
    runner = make_runner("flashsac", tmp_path)
    runner.save(tmp_path / "checkpoint.pt")
    document = load_checkpoint(tmp_path / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="trained on task 'fake_task'"):
        check_same_task(document, "g1_walk_flat", tmp_path / "checkpoint.pt")


def test_atomic_save_leaves_the_old_checkpoint_when_writing_fails(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"task": "a"})
    before = path.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        save_checkpoint(path, {"task": Unpicklable()})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_stop_request_checkpoints_and_returns(tmp_path):
    runner = make_runner("flashsac", tmp_path)
    previous = signal.signal(signal.SIGINT, lambda *_: runner.request_stop())
    try:
        signal.raise_signal(signal.SIGINT)
        result = runner.train(max_env_steps=10**9)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.interrupted
    assert load_checkpoint(tmp_path / "checkpoint.pt")["task"] == "fake_task"


def test_a_rank_stopped_by_its_peers_budget_is_done_not_interrupted(tmp_path):
    runner = make_runner("flashsac", tmp_path)
    runner.stop_consensus = lambda local_stop: True  # another rank's time budget ran out
    result = runner.train(max_env_steps=10**9, max_seconds=3600)
    assert not result.interrupted and result.env_steps == 0


def test_non_finite_env_rows_are_quarantined_and_counted(tmp_path):
    env, config, agent = tiny_agent("flashsac", env=PointMassEnv(num_envs=8, nan_rows=(2, 5), nan_every=3))
    runner = OffPolicyRunner(env, agent, config, RunIdentity("fake", "none", "flashsac", 0), None,
                             runner_config=RunnerConfig(log_every=1000))
    result = runner.train(max_env_steps=30 * 8)
    assert result.last_metrics["collector/quarantined_rows_total"] == 20.0
    assert result.last_metrics["collector/quarantined_steps_total"] == 10.0
    for tensor in [runner.replay.reward, runner.replay.action, *runner.replay.obs.values(),
                   *runner.replay.next_obs.values()]:
        assert torch.isfinite(tensor).all()
    assert all(torch.isfinite(p).all() for p in runner.agent.actor.parameters())


@pytest.mark.parametrize("algo", ["flashsac", "fastsac"])
@pytest.mark.parametrize("caught_by", ["log flush", "periodic checkpoint"])
def test_a_diverged_learner_stops_training_and_keeps_the_last_finite_checkpoint(tmp_path, algo, caught_by):
    runner = make_runner(algo, tmp_path)
    if caught_by == "periodic checkpoint":
        runner.config = RunnerConfig(log_every=10**6, checkpoint_every=3)
    runner.train(max_env_steps=12 * 8)  # learning has started; the final save wrote a checkpoint
    path = tmp_path / "checkpoint.pt"
    finite_checkpoint = path.read_bytes()
    with torch.no_grad():
        next(runner.agent.critic.parameters()).fill_(float("nan"))
    with pytest.raises(LearnerDiverged, match="non-finite loss"):
        runner.train(max_env_steps=runner.env_steps + 10**6)
    assert path.read_bytes() == finite_checkpoint


def test_snapshots_keep_the_learner_as_it_was_when_each_came_due(tmp_path):
    runner = make_runner("fastsac", tmp_path)
    # The first is due at once (saved after the first step); the second never within this run.
    runner.config = RunnerConfig(log_every=5, checkpoint_every=1000, snapshot_at_s=(1e-9, 1e6))
    runner.train(max_env_steps=12 * 8)
    early = load_checkpoint(tmp_path / "checkpoint-1e-09s.pt")
    final = load_checkpoint(tmp_path / "checkpoint.pt")
    assert early["counters"]["env_steps"] == 8 and final["counters"]["env_steps"] == 12 * 8
    assert not (tmp_path / "checkpoint-1e+06s.pt").exists()


def test_a_resumed_session_keeps_the_snapshot_times_its_run_already_passed(tmp_path):
    # Each session used to count from its own first step, so a resumed one wrote the same
    # times again, over the earlier session's snapshots.
    runner = make_runner("fastsac", tmp_path)
    runner.config = RunnerConfig(log_every=5, checkpoint_every=1000, snapshot_at_s=(1e-9,))
    runner.train(max_env_steps=4 * 8)
    first = (tmp_path / "checkpoint-1e-09s.pt").read_bytes()
    trained_s = runner.elapsed_before_resume_s
    runner.config = RunnerConfig(log_every=5, checkpoint_every=1000, snapshot_at_s=(1e-9, trained_s + 1e-6))
    runner.train(max_env_steps=runner.env_steps + 4 * 8)
    assert (tmp_path / "checkpoint-1e-09s.pt").read_bytes() == first
    later = load_checkpoint(tmp_path / snapshot_name(trained_s + 1e-6))  # due by the run's total training time
    assert later["counters"]["env_steps"] == 5 * 8


def test_snapshots_without_an_output_directory_are_refused_before_training(tmp_path):
    runner = make_runner("fastsac", None)
    runner.config = RunnerConfig(snapshot_at_s=(90.0,))
    with pytest.raises(ValueError, match="snapshot_at_s: snapshots need an output directory"):
        runner.train(max_env_steps=8)
    assert runner.env_steps == 0


@pytest.mark.parametrize("given", ["90,60", "0,30", "ninety"])
def test_snapshot_times_must_be_increasing_positive_seconds(given):
    with pytest.raises(ValueError, match="snapshot_at_s"):
        RunnerConfig.model_validate({"snapshot_at_s": given})


def test_snapshots_by_env_steps_are_kept_at_the_first_step_past_each_count(tmp_path):
    runner = make_runner("fastsac", tmp_path)  # 8 envs: 8 env steps per vectorized step
    runner.config = RunnerConfig(log_every=5, checkpoint_every=1000, snapshot_at_steps=(8, 20, 10**9))
    runner.train(max_env_steps=12 * 8)
    assert load_checkpoint(tmp_path / "checkpoint-8steps.pt")["counters"]["env_steps"] == 8
    assert load_checkpoint(tmp_path / "checkpoint-20steps.pt")["counters"]["env_steps"] == 24
    assert not (tmp_path / "checkpoint-1000000000steps.pt").exists()
    # A resumed session counts on from the run's env steps: a count passed earlier is not
    # taken again, a later one is.
    (tmp_path / "checkpoint-8steps.pt").unlink()
    runner.config = RunnerConfig(log_every=5, checkpoint_every=1000, snapshot_at_steps=(8, 120))
    runner.train(max_env_steps=runner.env_steps + 6 * 8)
    assert not (tmp_path / "checkpoint-8steps.pt").exists()
    assert load_checkpoint(tmp_path / "checkpoint-120steps.pt")["counters"]["env_steps"] == 120


def test_snapshots_by_env_steps_without_an_output_directory_are_refused_before_training():
    runner = make_runner("fastsac", None)
    runner.config = RunnerConfig(snapshot_at_steps=(80,))
    with pytest.raises(ValueError, match="snapshot_at_steps: snapshots need an output directory"):
        runner.train(max_env_steps=8)
    assert runner.env_steps == 0


def test_snapshot_counts_read_any_whole_number_notation():
    assert RunnerConfig.model_validate({"snapshot_at_steps": "2e7,2.5e7, 30000000"}).snapshot_at_steps == (
        20_000_000, 25_000_000, 30_000_000)
    assert RunnerConfig.model_validate({"snapshot_at_steps": [10, 20.0]}).snapshot_at_steps == (10, 20)


@pytest.mark.parametrize("given", ["30,20", "0,30", "2.5", "many", "20,20"])
def test_snapshot_counts_must_be_increasing_positive_whole_numbers(given):
    with pytest.raises(ValueError, match="snapshot_at_steps"):
        RunnerConfig.model_validate({"snapshot_at_steps": given})


@pytest.mark.parametrize("env_steps", [1, 200, 25_000_000])
def test_a_step_snapshot_name_gives_back_its_count_and_is_no_time(env_steps):
    from unilab_rl.snapshot_names import snapshot_env_steps, snapshot_name, snapshot_seconds, step_snapshot_name

    name = step_snapshot_name(env_steps)
    assert snapshot_env_steps(name) == env_steps and snapshot_seconds(name) is None
    assert snapshot_env_steps(snapshot_name(90.0)) is None and snapshot_env_steps("checkpoint-1e6steps.pt") is None
    exported = "policy" + name.removeprefix("checkpoint").removesuffix(".pt") + ".onnx"
    assert snapshot_env_steps(exported, "policy", ".onnx") == env_steps and snapshot_env_steps(exported) is None


@pytest.mark.parametrize("seconds", [90.0, 2.5, 1e-9, 1e6])
def test_a_snapshot_name_gives_back_its_time(seconds):
    from unilab_rl.snapshot_names import snapshot_name, snapshot_seconds

    assert snapshot_seconds(snapshot_name(seconds)) == seconds
    assert snapshot_seconds("checkpoint.pt") is None and snapshot_seconds("checkpoint-lates.pt") is None
    exported = "policy" + snapshot_name(seconds).removeprefix("checkpoint").removesuffix(".pt") + ".onnx"
    assert snapshot_seconds(exported, "policy", ".onnx") == seconds and snapshot_seconds(exported) is None
