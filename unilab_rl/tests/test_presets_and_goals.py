"""Presets and goals are data: a preset fills what unilab-train's command line leaves unset;
goals are read from whatever the run logs, under the names their sources give."""

import json

import pytest
from unilab_rl.cli import train as train_cli
from unilab_rl.cli import train_args
from unilab_rl.cli.presets import PRESETS
from unilab_rl.goals import Goal, GoalError, GoalTracker, check_known

LENGTH, ERROR = "collector/episode_length_fraction", "env/metrics/twist/lin_vel_error"


def test_the_graphed_gpu_walk_preset_on_the_cpu_is_refused_naming_the_override_that_steps_eagerly(tmp_path, capsys):
    pytest.importorskip("unilab")
    argv = ["--preset", "gpu_walk", "--backend", "mujoco", "--device", "cpu", "--num-envs", "2", "--steps", "8",
            "--out", str(tmp_path / "run"), "--no-tensorboard", "compile=false", "overlap_learning=false",
            "batch_size=32", "learning_starts=64"]
    assert train_cli.main(argv) == 2
    error = capsys.readouterr().err
    assert "cuda_graph=true needs a CUDA device" in error and "env.cuda_graph=false" in error
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_preset_fills_what_the_command_line_leaves_unset():
    args = train_cli.build_parser().parse_intermixed_args(["--preset", "gpu_walk", "--num-envs", "8", "gamma=0.9",
                                                           "--goal", "collector/episode_return>1"])
    train_args.apply_preset(args)
    preset = PRESETS["gpu_walk"]
    assert (args.task, args.backend, args.algo, args.minutes) == (preset.task, preset.backend, "fastsac", 1.5)
    assert args.num_envs == 8  # the flag wins
    assert args.overrides[-1] == "gamma=0.9" and "runner.overlap_learning=true" in args.overrides  # the override wins (last)
    assert args.goal == [*preset.goals, "collector/episode_return>1"]


def test_a_preset_gives_each_algorithm_its_own_budget_and_the_command_line_wins():
    def minutes(*argv):
        args = train_cli.build_parser().parse_intermixed_args(["--preset", "gpu_walk", *argv])
        train_args.apply_preset(args)
        return args.minutes, args.steps

    assert minutes() == (1.5, None) and minutes("--algo", "flashsac") == (3.0, None)
    assert minutes("--minutes", "2") == (2.0, None) and minutes("--steps", "1000") == (None, 1000)


def test_without_a_preset_the_defaults_apply_and_an_unknown_preset_is_refused():
    args = train_cli.build_parser().parse_intermixed_args([])
    train_args.apply_preset(args)
    assert (args.task, args.backend, args.algo, args.num_envs) == ("g1_walk_flat", "mujoco", "flashsac", 64)
    args = train_cli.build_parser().parse_intermixed_args(["--preset", "walk_fast"])
    with pytest.raises(train_cli.UsageError, match=r"unknown preset 'walk_fast'; valid: \['gpu_track', 'gpu_track_walk_run', 'gpu_walk'\]"):
        train_args.apply_preset(args)


@pytest.mark.parametrize("algo", ["fastsac", "flashsac"])
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_resolves_for_both_algorithms_with_its_overrides_applied(name, algo, tmp_path):
    # Each setting of the preset reaches the resolved config it names, with its value.
    from unilab.config_overrides import parse_overrides
    from unilab.registry import task_config
    from unilab_rl.cli import train_plan
    from unilab_rl.runner_config import RunnerConfig

    args = train_cli.build_parser().parse_intermixed_args(["--preset", name, "--algo", algo, "--out", str(tmp_path)])
    train_args.apply_preset(args)
    plan = train_plan.prepare(args, [PRESETS[name].task], check_out=False)
    config = plan["algo_config"]
    env_config = task_config(PRESETS[name].task, plan["env_overrides"])  # the env's tokens, resolved as a build would
    checked_env = 0
    for token in PRESETS[name].overrides_for(algo):
        namespace, _, setting = token.partition(".")
        key, value = setting.split("=", 1)
        if namespace == "algo":
            assert getattr(config, key) == getattr(type(config).model_validate({key: value}), key), key
        elif namespace == "runner":
            assert getattr(plan["runner_config"], key) == getattr(RunnerConfig.model_validate({key: value}), key), key
        else:
            assert namespace == "env", token
            resolved = env_config
            for part in key.split("."):
                resolved = resolved[part] if isinstance(resolved, dict) else getattr(resolved, part)
            [(_, parsed)] = parse_overrides([setting])
            assert resolved == parsed, key
            checked_env += 1
    assert checked_env == len(plan["env_overrides"])  # every env setting of the preset was checked


@pytest.mark.parametrize("text", ["loss", "a<b", "a<inf", "<0.3", "a=3"])
def test_a_malformed_goal_is_refused_naming_it(text):
    with pytest.raises(GoalError, match="--goal"):
        Goal.parse(text)


def test_a_goal_on_a_metric_that_is_never_logged_lists_the_logged_ones():
    with pytest.raises(GoalError, match=r"unknown metric 'env/metrics/twist/lin_vel_eror'; a goal takes one of \["):
        check_known([Goal.parse("env/metrics/twist/lin_vel_eror<0.25")], [LENGTH, ERROR])


def test_goals_need_every_metric_and_carry_a_metric_through_intervals_that_lack_it():
    tracker = GoalTracker([Goal.parse(f"{LENGTH}>0.9"), Goal.parse(f"{ERROR}<0.25")])
    tracker.observe(60.0, {LENGTH: 0.3, ERROR: 0.6})
    tracker.observe(100.0, {LENGTH: 0.95, ERROR: 0.3})  # long episodes, poor tracking: not met
    assert tracker.first_met_wall_s is None
    tracker.observe(400.0, {LENGTH: 0.95, ERROR: 0.2})
    tracker.observe(500.0, {ERROR: 0.21})  # no episode ended in this interval: its length carries
    summary = tracker.summary()
    assert summary["first_goals_met_wall_s"] == 400.0 and summary["goals_met_at_end"] is True
    tracker.observe(600.0, {ERROR: 0.4})
    assert tracker.summary()["goals_met_at_end"] is False and tracker.summary()["first_goals_met_wall_s"] == 400.0


def test_the_summary_gives_the_median_rate_of_the_intervals_that_learned():
    tracker = GoalTracker([])
    for updates, rate in ((0, 900.0), (10, 100.0), (20, 500.0), (30, 520.0)):
        tracker.observe(1.0, {"progress/updates": updates, "perf/env_steps_per_s": rate,
                              "perf/env_steps_per_s_all_ranks": 2 * rate})
    summary = tracker.summary()
    assert summary["median_env_steps_per_s_learning"] == 500.0
    assert summary["median_env_steps_per_s_all_ranks_learning"] == 1000.0
    assert json.dumps(summary)  # a JSON document


@pytest.mark.parametrize("algo", ["fastsac", "flashsac"])
@pytest.mark.parametrize("name", ["gpu_track", "gpu_track_walk_run"])
def test_a_tracking_preset_lets_actions_reach_every_joint_angle_of_its_clips(name, algo):
    # Both algorithms squash actions into [-action_scale, action_scale]; the PD targets
    # offset + scale * action must cover the clips' joint angles, or no policy can track them.
    from unilab import make_manager_based_rl_env

    preset = PRESETS[name]
    env = make_manager_based_rl_env(preset.task, backend="mujoco", num_envs=1)
    try:
        table = env.command_manager.term("motion").library
        actions = env.action_manager
        needed = ((table.packed[:, table.columns["joint_pos"]] - actions.offset) / actions.scale).abs().max()
    finally:
        env.close()
    assert needed > 1.0  # the default range would not do
    assert preset.entry_for(algo).algo.action_scale >= needed
