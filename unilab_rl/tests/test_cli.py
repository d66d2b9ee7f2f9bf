"""CLI behaviour on good and bad input, with a fake env factory (fast) where the real env
is not the point, and unilab's real factory where its error messages are."""

import json
import re

import pytest
import torch
from fake_env import PointMassEnv
from helpers import TINY, tiny_agent
from unilab_rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_rl.cli import play as play_cli
from unilab_rl.cli import train as train_cli
from unilab_rl.cli import train_plan
from unilab_rl.runner import TIMED_PHASES

TASKS = ["fake_task", "other_task"]
FORMAT_KEYS = ("format", "format_version", "contract_version", "integrity")  # save_checkpoint writes these
TINY_TOKENS = [f"{k}={v}" for k, v in TINY["flashsac"].items()] + ["log_every=4", "checkpoint_every=1000"]


def fake_factory(task, *, backend, num_envs, device, seed, overrides):
    if backend != "fake":
        raise ValueError(f"unknown backend {backend!r}; valid backends: ['fake']")
    unknown = sorted(set(overrides) - {"max_episode_length"})
    if unknown:
        raise ValueError(f"override {unknown[0]!r}: unknown key; valid keys: ['max_episode_length']")
    return PointMassEnv(num_envs=num_envs, seed=seed, max_episode_length=int(overrides.get("max_episode_length", 20)))


def run_train(argv):
    return train_cli.main(argv, factory=fake_factory, tasks=TASKS)


def base_args(out, task="fake_task"):
    return ["--task", task, "--backend", "fake", "--num-envs", "8", "--steps", "160", "--out", str(out),
            "--no-progress", "--no-tensorboard"]


def test_train_writes_checkpoint_metrics_and_curve_then_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + ["--curve-json", str(tmp_path / "curve.json"), *TINY_TOKENS,
                                       "max_episode_length=10"]) == 0
    document = load_checkpoint(out / "checkpoint.pt")
    assert document["task"] == "fake_task" and document["env_overrides"] == {"max_episode_length": "10"}
    assert document["counters"]["env_steps"] == 160
    assert (out / "metrics.jsonl").read_text().count("\n") >= 4
    curve = json.loads((tmp_path / "curve.json").read_text())
    assert curve["points"] and "episode_return" in curve["points"][-1]

    assert run_train(base_args(out) + ["--resume", str(out / "checkpoint.pt"), *TINY_TOKENS]) == 0
    resumed = load_checkpoint(out / "checkpoint.pt")
    assert resumed["counters"]["env_steps"] == 320
    assert resumed["env_overrides"] == {"max_episode_length": "10"}  # carried over from the checkpoint
    assert "done" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--algo", "ppo"], "unknown algorithm 'ppo'; valid: fastsac, flashsac"),
        (["batch_size=lots"], "bad algorithm override: batch_size='lots'"),
        (["algo.not_a_field=1"], "unknown algorithm key 'not_a_field'"),
        (["no_equals_sign"], "expected key=value"),
        (["--backend", "nope"], "valid backends: ['fake']"),
        (["bogus.key=1"], "valid keys: ['max_episode_length']"),
        (["--num-envs", "0"], "--num-envs must be >= 1"),
    ],
)
def test_bad_input_fails_with_a_message_and_writes_nothing(tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    argv = base_args(out)
    if "--num-envs" in extra or "--backend" in extra:
        flag = extra[0]
        argv[argv.index(flag) + 1] = extra[1]
        extra = []
    assert run_train(argv + TINY_TOKENS + extra) == train_cli.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
    assert not (out / "checkpoint.pt").exists()


def test_settings_under_which_learning_never_starts_are_refused_before_anything_is_written(tmp_path, capsys):
    # FlashSAC's defaults wait for 50,000 transitions; 8 envs x 2048 hold 16,384: the run
    # used to collect to its end without one update, and exit 0.
    out = tmp_path / "run"
    assert run_train(base_args(out)) == train_cli.EXIT_BAD_INPUT
    assert ("--num-envs 8: learning_starts=50000 and batch_size=2048 wait for 50000 transitions, but the replay "
            "holds num_envs x replay_capacity_per_env = 8 x 2048 = 16384") in capsys.readouterr().err
    assert not out.exists()
    assert run_train(base_args(out) + ["learning_starts=64", "batch_size=32", "replay_capacity_per_env=4"]) == 2
    assert "wait for 64 transitions" in capsys.readouterr().err


def test_overrides_may_follow_flags(tmp_path):
    # A seed's command (--seeds) puts its own flags after the user's tokens, so both orders must parse.
    out = tmp_path / "run"
    argv = base_args(out)[:-2] + [*TINY_TOKENS, "--no-progress", "batch_size=16", "--no-tensorboard"]
    assert run_train(argv) == 0
    assert load_checkpoint(out / "checkpoint.pt")["algo_config"]["batch_size"] == 16


def test_data_parallel_ranks_keep_the_cuda_graph_setting_they_are_given(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")  # what torchrun sets for each rank
    monkeypatch.setenv("RANK", "0")
    parser = train_cli.build_parser()
    args = base_args(tmp_path / "run") + TINY_TOKENS
    assert train_plan.prepare(parser.parse_args(args), TASKS)["algo_config"].cuda_graph
    plan = train_plan.prepare(parser.parse_args(args + ["cuda_graph=false"]), TASKS)
    assert plan["algo_config"].cuda_graph is False


def test_an_env_prefix_reaches_an_env_setting_that_an_algorithm_field_shadows():
    from unilab_rl.algorithms import lookup
    from unilab_rl.cli.overrides import split_overrides
    from unilab_rl.runner_config import RunnerConfig

    split = split_overrides(["env.cuda_graph=true", "cuda_graph=false", "env.rewards.velocity.weights.alive=2"],
                            lookup("fastsac").config_class, RunnerConfig)
    assert split.algo == {"cuda_graph": "false"}
    assert split.env == {"cuda_graph": "true", "rewards.velocity.weights.alive": "2"}


def test_an_env_prefixed_override_is_validated_by_the_env(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS + ["env.max_episode_length=12"]) == 0
    assert load_checkpoint(out / "checkpoint.pt")["env_overrides"] == {"max_episode_length": "12"}
    assert run_train(base_args(tmp_path / "bad") + TINY_TOKENS + ["env.walk_speed=3"]) == train_cli.EXIT_BAD_INPUT
    assert "override 'walk_speed': unknown key" in capsys.readouterr().err


def test_unknown_task_lists_the_valid_ones(tmp_path, capsys):
    assert run_train(base_args(tmp_path / "run", task="walk_on_moon")) == 2
    assert "unknown task 'walk_on_moon'; valid: fake_task, other_task" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_unknown_backend_is_refused_before_any_env_is_built(tmp_path, capsys):
    # unilab's real factory: the active backends come from the workspace, and a bad name fails
    # in the plan, naming the flag, where the factory would only say so once it built.
    assert train_cli.main(["--backend", "mujocco", "--out", str(tmp_path / "run")]) == train_cli.EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert "--backend: unknown backend 'mujocco'; valid: mujoco, mjwarp" in captured.err
    assert "building" not in captured.out
    assert not (tmp_path / "run").exists()


def test_out_that_is_not_writable_is_refused(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert run_train(base_args(blocker / "run") + TINY_TOKENS) == 2
    assert "is not writable" in capsys.readouterr().err


def test_resume_from_another_task_or_a_corrupt_file_changes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    checkpoint = out / "checkpoint.pt"
    before = checkpoint.read_bytes()
    assert run_train(base_args(out, task="other_task") + ["--resume", str(checkpoint), *TINY_TOKENS]) == 2
    assert "trained on task 'fake_task', not 'other_task'" in capsys.readouterr().err
    assert checkpoint.read_bytes() == before

    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"\x00garbage")
    assert run_train(base_args(tmp_path / "run2") + ["--resume", str(corrupt)]) == 2
    assert "corrupt or not a unilab_rl checkpoint" in capsys.readouterr().err
    assert corrupt.read_bytes() == b"\x00garbage"
    assert not (tmp_path / "run2" / "checkpoint.pt").exists()


def test_play_refuses_a_video_path_it_could_not_write_before_playing(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    capsys.readouterr()

    def no_factory(*args, **kwargs):
        raise AssertionError("no episode is played when the video cannot be written")

    argv = ["--checkpoint", str(out / "checkpoint.pt"), "--episodes", "1", "--video", str(blocker / "v.mp4")]
    assert play_cli.main(argv, factory=no_factory) == 2
    assert f"--video {blocker} is not writable" in capsys.readouterr().err


def test_play_runs_deterministic_episodes_from_the_checkpoint_task(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    capsys.readouterr()
    argv = ["--checkpoint", str(out / "checkpoint.pt"), "--episodes", "5", "--num-envs", "4"]
    assert play_cli.main(argv, factory=fake_factory) == 0
    first = capsys.readouterr().out
    assert "task=fake_task" in first and "actor=latest" in first and "return_mean" in first
    assert play_cli.main(argv, factory=fake_factory) == 0
    assert capsys.readouterr().out == first  # deterministic policy, same env seed


def test_play_mirror_averaged_acts_symmetric_and_says_so(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    capsys.readouterr()
    played = []
    acting = play_cli.MirrorAveragedActing.act
    monkeypatch.setattr(play_cli.MirrorAveragedActing, "act",
                        lambda self, obs, deterministic: played.append(self) or acting(self, obs, deterministic))
    argv = ["--checkpoint", str(out / "checkpoint.pt"), "--episodes", "5", "--num-envs", "4", "--mirror-averaged"]
    assert play_cli.main(argv, factory=fake_factory) == 0
    assert "actor=latest mirror-averaged" in capsys.readouterr().out and played
    # What it plays: in the mirrored world, the mirror of its action; deterministic only.
    env = PointMassEnv(num_envs=4, seed=3)
    averaged = played[0]
    obs = env.reset()
    mirrored = {g: obs[g].index_select(-1, i) * s for g, (i, s) in env.mirrors["observations"].items()}
    index, sign = env.mirrors["action"]
    torch.testing.assert_close(averaged.act(mirrored, True), averaged.act(obs, True).index_select(-1, index) * sign)
    with pytest.raises(ValueError, match="acts deterministically only"):
        averaged.act(obs, False)


def test_play_mirror_averaged_of_a_task_without_a_mirror_is_bad_input(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    capsys.readouterr()

    def mirrorless_factory(*args, **kwargs):
        env = fake_factory(*args, **kwargs)
        env.mirrors = None
        return env

    argv = ["--checkpoint", str(out / "checkpoint.pt"), "--episodes", "1", "--mirror-averaged"]
    assert play_cli.main(argv, factory=mirrorless_factory) == 2
    assert "--mirror-averaged: task 'fake_task' declares no left-right mirror" in capsys.readouterr().err


def test_play_does_not_compile_a_policy_trained_with_compile(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    document = load_checkpoint(out / "checkpoint.pt")
    document["algo_config"]["compile"] = True  # as the GPU presets train
    save_checkpoint(out / "checkpoint.pt", {k: v for k, v in document.items() if k not in FORMAT_KEYS})

    def refuse(*_, **__):
        raise AssertionError("play compiled a network")

    monkeypatch.setattr(torch.nn.Module, "compile", refuse)
    assert play_cli.main(["--checkpoint", str(out / "checkpoint.pt"), "--episodes", "2"], factory=fake_factory) == 0


def test_play_refuses_a_corrupt_checkpoint(tmp_path, capsys):
    corrupt = tmp_path / "c.pt"
    corrupt.write_text("nope")
    assert play_cli.main(["--checkpoint", str(corrupt)], factory=fake_factory) == 2
    assert "corrupt" in capsys.readouterr().err


def test_real_factory_names_valid_backends_and_override_keys(tmp_path, capsys):
    pytest.importorskip("unilab")
    out = tmp_path / "run"
    args = ["--task", "g1_walk_flat", "--num-envs", "2", "--steps", "2", "--out", str(out), "--no-progress",
            "--no-tensorboard", "batch_size=32", "learning_starts=64"]
    assert train_cli.main(args + ["--backend", "not_a_backend"]) == 2
    assert "mujoco" in capsys.readouterr().err
    assert train_cli.main(args + ["--backend", "mujoco", "rewards.nope=1"]) == 2
    assert "valid keys" in capsys.readouterr().err
    assert train_cli.main(["--task", "nope", "--out", str(out), "--steps", "2"]) == 2
    assert "g1_walk_flat" in capsys.readouterr().err
    assert not (out / "checkpoint.pt").exists()
    torch.set_num_threads(1)


def test_ctrl_c_during_training_saves_a_checkpoint_and_exits_130(tmp_path, capsys):
    import signal

    def interrupting_factory(task, **kwargs):
        env = fake_factory(task, **kwargs)
        original_step = env.step

        def step(action):
            if env.steps == 7:
                signal.raise_signal(signal.SIGINT)
            return original_step(action)

        env.step = step
        return env

    out = tmp_path / "run"
    argv = base_args(out) + ["--steps", "100000", *TINY_TOKENS]
    before = signal.getsignal(signal.SIGINT)  # the default handler, or SIG_IGN in a background job
    assert train_cli.main(argv, factory=interrupting_factory, tasks=TASKS) == train_cli.EXIT_INTERRUPTED
    assert "interrupt received" in capsys.readouterr().err
    assert load_checkpoint(out / "checkpoint.pt")["counters"]["iterations"] == 8
    assert signal.getsignal(signal.SIGINT) is before  # the handler the run found is back


def test_the_training_env_skips_the_per_step_action_check_unless_asked():
    pytest.importorskip("unilab")
    factory, _ = train_cli.default_env_factory()
    for overrides, expected in ((None, False), ({"validate_actions": "true"}, True)):
        env = factory("g1_walk_flat", backend="mujoco", num_envs=1, overrides=overrides)
        try:
            assert env.cfg.validate_actions is expected
        finally:
            env.close()


def test_a_collector_step_on_mjwarp_makes_no_host_sync():
    pytest.importorskip("unilab")
    from unilab_rl.collector import Collector
    from unilab_rl.contract import EnvSpec
    from unilab_rl.replay import ReplayBuffer
    from unilab_rl.timing import SampledPhaseTimer
    from unisim.host_sync import HostSyncProbe

    factory, _ = train_cli.default_env_factory()
    env = factory("g1_walk_flat", backend="mjwarp", num_envs=4)
    try:
        spec = EnvSpec.from_env(env)
        _, config, agent = tiny_agent("flashsac", env=env)
        replay = ReplayBuffer(spec.num_envs, 16, spec.observation_spec, spec.action_dim, config.n_step, config.gamma,
                              spec.device)
        collector = Collector(env, spec, agent, replay, SampledPhaseTimer(spec.device, sample_every=10**6))
        collector.step()  # the first step also checks the env's output once
        with HostSyncProbe() as probe:
            for _ in range(3):
                collector.step()
        assert probe.syncs == [] and probe.kernel_op_count > 0
    finally:
        env.close()


def test_a_run_reports_its_goals_on_the_metrics_it_logs(tmp_path, capsys):
    out = tmp_path / "run"
    goals = ["--goal", "collector/episode_length_fraction>0.5", "--goal", "env/fake_phase_ms<0.5"]
    assert run_train(base_args(out) + [*TINY_TOKENS, "max_episode_length=10", *goals]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["goals"] == ["collector/episode_length_fraction>0.5", "env/fake_phase_ms<0.5"]
    assert summary["goal_values_at_end"] == {"collector/episode_length_fraction": pytest.approx(1.0, abs=0.5),
                                             "env/fake_phase_ms": 1.0}
    assert summary["goals_met_at_end"] is False and summary["first_goals_met_wall_s"] is None  # 1.0 is not < 0.5
    assert summary["simulator"] == {"steps": summary["env_steps"] // 8, "altered_worlds": 0}  # 8 envs
    assert 0 <= summary["first_learning_s"] <= summary["wall_s"]
    printed = capsys.readouterr()
    assert "not met at the end" in printed.out and "altered the physics" not in printed.err
    assert "the first updates were issued" in printed.out


def test_a_run_whose_simulator_altered_worlds_says_so_out_loud(tmp_path, capsys):
    def altering_factory(*args, **kwargs):
        env = fake_factory(*args, **kwargs)
        env.altered_worlds = 3
        return env

    out = tmp_path / "run"
    assert train_cli.main(base_args(out) + [*TINY_TOKENS], factory=altering_factory, tasks=TASKS) == 0
    assert json.loads((out / "summary.json").read_text())["simulator"]["altered_worlds"] == 3
    assert "the simulator altered the physics of 3 of 8 worlds" in capsys.readouterr().err


def test_a_goal_on_a_metric_the_env_does_not_declare_is_bad_input(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_train(base_args(out) + [*TINY_TOKENS, "--goal", "env/metrics/nope<1"]) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'env/metrics/nope'" in err and "env/fake_phase_ms" in err
    assert not (out / "metrics.jsonl").exists()


def test_goals_take_the_metrics_a_single_process_run_logs_and_keep_their_thresholds_exactly(tmp_path, capsys):
    out = tmp_path / "run"
    # Logged by every run, refused before; the all-ranks rate, logged only by several ranks, accepted before.
    goals = ["--goal", "progress/replay_transitions>=1", "--goal", "collector/episodes>=1234567"]
    assert run_train(base_args(out) + [*TINY_TOKENS, *goals]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["goals"] == ["progress/replay_transitions>=1", "collector/episodes>=1234567"]  # was 1.23457e+06
    assert run_train(base_args(tmp_path / "b") + [*TINY_TOKENS, "--goal", "perf/env_steps_per_s_all_ranks>0"]) == 2
    assert "unknown metric 'perf/env_steps_per_s_all_ranks'" in capsys.readouterr().err


def test_goals_take_the_phase_timings_and_the_names_an_env_adds_as_it_runs(tmp_path):
    out = tmp_path / "run"
    goals = ["--goal", "perf/policy_ms>0", "--goal", "env/curriculum/any/stage>=0"]
    assert run_train(base_args(out) + [*TINY_TOKENS, *goals]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["goal_values_at_end"]["perf/policy_ms"] > 0
    logged = set().union(*(json.loads(line).keys() for line in (out / "metrics.jsonl").read_text().splitlines()))
    timings = {k for k in logged if k.startswith("perf/") and k.endswith("_ms")}
    assert timings and timings <= {f"perf/{phase}_ms" for phase in TIMED_PHASES}  # the declared phases


def test_a_goal_on_a_learner_loss_is_taken_and_one_on_an_unknown_loss_is_refused(tmp_path, capsys):
    assert run_train(base_args(tmp_path / "a") + [*TINY_TOKENS, "--goal", "loss/actor/temperature<100"]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["goals_met_at_end"] is True and summary["goal_values_at_end"]["loss/actor/temperature"] > 0
    assert run_train(base_args(tmp_path / "b") + [*TINY_TOKENS, "--goal", "loss/actor/nope<1"]) == 2
    err = capsys.readouterr().err
    assert "unknown metric 'loss/actor/nope'" in err and "loss/critic/loss" in err


def test_start_up_is_said_and_kept_apart_from_the_training_budget(tmp_path, capsys, monkeypatch):
    # A slow env build must show up as start-up, not as training time.
    import time as time_module

    import unilab_rl.cli.train as train_module

    real_build = train_module.build_env

    def slow_build(*args, **kwargs):
        time_module.sleep(0.3)
        return real_build(*args, **kwargs)

    monkeypatch.setattr(train_module, "build_env", slow_build)
    out = tmp_path / "run"
    assert run_train(base_args(out) + [*TINY_TOKENS, "max_episode_length=10"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert 0.3 <= summary["startup_s"] <= summary["process_wall_s"] - summary["wall_s"] + 0.1
    assert summary["machine"]["sched_affinity"] >= 1 and "lscpu" in summary["machine"]
    phases = summary["startup_phases_s"]
    assert set(phases) == {"env_build_s", "learner_s", "replay_and_runner_s", "other_s"}
    assert phases["env_build_s"] >= 0.3  # the slow build is charged to its phase
    assert abs(sum(phases.values()) - summary["startup_s"]) < 0.1
    printed = capsys.readouterr().out
    assert f"unilab-train: start-up took {summary['startup_s']:.1f} s (env build " in printed
    # In-process, "imports" is the test process's age up to the command: a launch figure past start-up.
    assert summary["imports_s"] > 0
    launch = re.search(r"(\d+\.\d) s from launch with the imports; training starts", printed)
    assert launch and abs(float(launch.group(1)) - (summary["imports_s"] + summary["startup_s"])) < 0.2


@pytest.mark.parametrize("writes_bytecode", [True, False])
def test_start_up_says_when_python_writes_no_bytecode(tmp_path, capsys, monkeypatch, writes_bytecode):
    # Without cached bytecode every launch compiles its imports again: the start-up figures
    # must say they include that, and the summary must keep it beside them.
    import unilab_rl.cli.summary as summary_module
    import unilab_rl.cli.train as train_module

    for module in (train_module, summary_module):
        monkeypatch.setattr(module, "python_writes_bytecode", lambda: writes_bytecode)
    out = tmp_path / "run"
    assert run_train(base_args(out) + [*TINY_TOKENS, "max_episode_length=10"]) == 0
    assert json.loads((out / "summary.json").read_text())["writes_bytecode"] is writes_bytecode
    printed = capsys.readouterr().out
    assert ("this Python writes no bytecode" in printed) is (not writes_bytecode)
    assert ("Unset PYTHONDONTWRITEBYTECODE" in printed) is (not writes_bytecode)  # and how to keep it


def test_a_resume_may_turn_the_averaged_policy_on(tmp_path):
    out = tmp_path / "run"
    assert run_train(base_args(out) + TINY_TOKENS) == 0
    before = load_checkpoint(out / "checkpoint.pt")
    assert "averaged_actor" not in before["agent"]
    resumed_out = tmp_path / "resumed"
    assert run_train(base_args(resumed_out) + ["--resume", str(out / "checkpoint.pt"), *TINY_TOKENS,
                                               "averaged_policy_tau=0.5"]) == 0
    after = load_checkpoint(resumed_out / "checkpoint.pt")
    assert after["algo_config"]["averaged_policy_tau"] == 0.5
    averaged, actor = after["agent"]["averaged_actor"], after["agent"]["actor"]
    assert averaged.keys() == actor.keys()
    # kept beside the actor, trailing its updates (how it starts: test_averaged_policy.py)
    assert any(not torch.equal(averaged[k], actor[k]) for k in actor if actor[k].is_floating_point())
