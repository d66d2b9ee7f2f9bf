"""The GPU preset run is launched by the lead on an H200; here: its command and its summary."""

import json

from unilab_rl.cli import gpu_walk


def test_gpu_walk_runs_flashsac_on_mjwarp_with_the_preset_and_summarizes(tmp_path, monkeypatch):
    captured = {}

    def fake_train(argv):
        captured["argv"] = argv
        curve = {"max_episode_length": 1000, "points": [
            {"wall_s": 60.0, "env_steps": 1, "env_episode_length": 300.0, "lin_vel_tracking_error": 0.6},
            {"wall_s": 400.0, "env_steps": 2, "env_episode_length": 950.0, "lin_vel_tracking_error": 0.2},
        ]}
        (tmp_path / "curve.json").write_text(json.dumps(curve))
        return 0

    monkeypatch.setattr(gpu_walk.train_cli, "main", fake_train)
    assert gpu_walk.main(["--out", str(tmp_path), "compile=true"]) == 0
    argv = captured["argv"]
    assert argv[argv.index("--backend") + 1] == "mjwarp" and argv[argv.index("--algo") + 1] == "flashsac"
    assert argv[argv.index("--num-envs") + 1] == "4096"
    assert "batch_size=8192" in argv and argv[-1] == "compile=true"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["goal_met_at_end"] is True and summary["first_goal_wall_s"] == 400.0


def test_goal_needs_both_long_episodes_and_low_tracking_error():
    assert not gpu_walk.goal_met({"env_episode_length": 950.0, "lin_vel_tracking_error": 0.3}, 1000)
    assert not gpu_walk.goal_met({"env_episode_length": 800.0, "lin_vel_tracking_error": 0.1}, 1000)
    assert gpu_walk.goal_met({"env_episode_length": 901.0, "lin_vel_tracking_error": 0.24}, 1000)


def test_intervals_without_ended_episodes_keep_the_last_measured_length():
    curve = {"max_episode_length": 1000, "points": [
        {"wall_s": 1.0, "env_episodes_ended": 50, "env_episode_length": 980.0, "lin_vel_tracking_error": 0.2},
        {"wall_s": 2.0, "env_episodes_ended": 0, "env_episode_length": 0.0, "lin_vel_tracking_error": 0.2},
    ]}
    summary = gpu_walk.summarize(curve)
    assert summary["goal_met_at_end"] and summary["final"]["env_episode_length"] == 980.0


def test_the_summary_gives_the_median_rate_of_the_intervals_that_learned():
    curve = {"max_episode_length": 1000, "points": [
        {"wall_s": 1.0, "updates": 0, "env_steps_per_s": 900.0, "env_steps_per_s_all_ranks": 1800.0},
        {"wall_s": 2.0, "updates": 10, "env_steps_per_s": 100.0, "env_steps_per_s_all_ranks": 200.0},
        {"wall_s": 3.0, "updates": 20, "env_steps_per_s": 500.0, "env_steps_per_s_all_ranks": 1000.0},
        {"wall_s": 4.0, "updates": 30, "env_steps_per_s": 520.0, "env_steps_per_s_all_ranks": 1040.0},
    ]}
    summary = gpu_walk.summarize(curve)
    assert summary["median_env_steps_per_s_learning"] == 500.0
    assert summary["median_env_steps_per_s_all_ranks_learning"] == 1000.0
    assert "median_env_steps_per_s_learning" not in gpu_walk.summarize({"points": [curve["points"][0]]})
