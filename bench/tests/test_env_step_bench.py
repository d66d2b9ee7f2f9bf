"""The env benchmark runs end to end and writes the record the perf docs rely on."""

from __future__ import annotations

import json
import time

import pytest
import torch
from unilab_bench import dispatch_probes as probes
from unilab_bench import env_step as bench


def test_bench_writes_a_json_record_with_phases_ratios_and_counts(tmp_path):
    out = tmp_path / "bench.json"
    threads = torch.get_num_threads()  # the bench sets one thread on cpu; keep the suite's setting
    try:
        bench.main(["--backend", "mujoco", "--num-envs", "2", "--steps", "3", "--warmup", "1", "--samples", "3",
                    "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    record = json.loads(out.read_text())
    assert set(record["env_steps_per_s"]) == {"raw", "env_zero", "env_random", "env_compare"}
    assert all(set(v) == {"min", "median", "max"} for v in record["env_steps_per_s"].values())
    for phase in ("backend_step_ms", "update_state_ms", "reset_done_ms", "manager_overhead_ms"):
        assert record["phases_ms_per_step"][phase] >= 0
    assert record["python_calls_per_env_step"] > 0
    assert record["vs_compare"]["reward_kernel_ops_env"] < record["vs_compare"]["reward_kernel_ops_compare"]
    dispatch = record["dispatch_per_env_step"]
    assert dispatch["host_syncs_per_step"] == 0 and dispatch["backend_calls_left_out"] == 1.0
    assert 0 < dispatch["kernel_ops_per_step"] < dispatch["aten_ops_per_step"]
    # Where the ops are, by the step timer's phases: the whole step holds every other phase's ops,
    # and the env's own timer is back in place (the profiled pass above read it).
    by_phase = record["kernel_ops_per_env_step_by_phase"]
    assert by_phase["step_total"] == dispatch["kernel_ops_per_step"]
    assert by_phase["update_state"] > 0 and by_phase["reset_done"] > 0 and by_phase["observation"] > 0
    inner = ("action", "backend_step", "update_state", "final_obs", "reset_done", "observation", "metrics")
    assert sum(by_phase[p] for p in inner) <= by_phase["step_total"]
    assert record["backend_counters"].get("redundant_physics_steps_per_env_step", 0) == 0
    assert record["num_envs"] == 2 and record["git_commit"]
    assert record["machine"]["sched_affinity"] >= 1 and "lscpu" in record["machine"]
    assert time.strptime(record["time"], "%Y-%m-%dT%H:%M:%S%z")  # when it ran, beside where
    assert record["comparison_task"] == "g1_walk_flat_unfused" and record["comparison_overrides"] == []


def test_a_comparison_override_reaches_only_the_comparison_env(tmp_path, monkeypatch):
    built = {}
    real = bench.make_manager_based_rl_env

    def spy(task, **kw):
        built[task] = list(kw["overrides"])
        return real(task, **kw)

    monkeypatch.setattr(bench, "make_manager_based_rl_env", spy)
    threads = torch.get_num_threads()
    try:
        bench.main(["--backend", "mujoco", "--num-envs", "2", "--steps", "2", "--warmup", "1", "--samples", "3",
                    "--override", "episode_length_s=10", "--compare-override", "episode_length_s=5",
                    "--out", str(tmp_path / "b.json")])
    finally:
        torch.set_num_threads(threads)
    assert built["g1_walk_flat"][-1] == "episode_length_s=10"
    assert built["g1_walk_flat_unfused"][-2:] == ["episode_length_s=10", "episode_length_s=5"]


def test_a_comparison_override_without_a_comparison_owner_is_refused():
    with pytest.raises(SystemExit, match="--compare-override"):
        bench.main(["--backend", "mujoco", "--num-envs", "2", "--compare-task", "", "--compare-override", "x=1"])


@pytest.mark.parametrize(("argv", "named"), [
    (["--num-envs", "0"], "--num-envs"), (["--steps", "0"], "--steps"), (["--warmup", "-1"], "--warmup"),
    (["--task", "walk_on_moon"], "unknown task 'walk_on_moon'"), (["--backend", "bullet"], "--backend"),
    (["--override", "walk_speed=3"], "override 'walk_speed'"),
    (["--compare-override", "walk_speed=3"], "override 'walk_speed'"),
    (["--backend-option", "nthread"], "expected 'key=value'"),
])
def test_bad_arguments_are_refused_naming_what_is_wrong_before_any_env_is_built(argv, named, capsys, monkeypatch):
    monkeypatch.setattr(bench, "make_manager_based_rl_env", lambda *a, **k: pytest.fail("an env was built"))
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2
    assert named in capsys.readouterr().err


def test_a_sync_is_attributed_to_the_innermost_caller_outside_torch():
    from traceback import FrameSummary

    stack = [FrameSummary("/src/unilab_bench/env_step.py", 10, "_host_syncs_per_step"),
             FrameSummary("/src/unisim/adapters/mjwarp.py", 212, "write_model_field"),
             FrameSummary("/site-packages/torch/cuda/__init__.py", 1270, "synchronize"),
             FrameSummary("/usr/lib/python3.12/warnings.py", 99, "_showwarnmsg"),
             FrameSummary("/src/unilab_bench/env_step.py", 120, "record")]
    assert probes.sync_caller(stack) == "/src/unisim/adapters/mjwarp.py:212 (write_model_field)"
    assert probes.sync_caller(stack[2:]) == "unknown caller"


def test_only_the_sync_warning_counts_as_a_sync_not_the_modes_prototype_notice():
    # Both texts as torch 2.11 emits them (libc10_cuda.so and libtorch_python.so).
    assert probes.is_sync_warning("called a synchronizing CUDA operation")
    assert not probes.is_sync_warning("Synchronization debug mode is a prototype feature and does not yet detect "
                                     "all synchronizing operations")


def test_gap_rows_time_raw_physics_plus_the_state_write_and_plus_the_envs_op_count(tmp_path):
    out = tmp_path / "gap.json"
    threads = torch.get_num_threads()
    try:
        bench.main(["--backend", "mujoco", "--num-envs", "2", "--steps", "2", "--warmup", "1", "--samples", "3",
                    "--compare-task", "", "--gap-rows", "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    record = json.loads(out.read_text())
    rows = {"raw_with_state_write", "raw_with_torch_ops", "raw_replaying_env_writes"}
    assert rows <= set(record["env_steps_per_s"]) and rows <= set(record["ratio_to_raw_median"])
    assert record["ratio_to_raw_median"]["env_vs_raw_replaying_env_writes"] > 0
    assert record["gap_rows_torch_ops_per_step"] == round(record["dispatch_per_env_step"]["kernel_ops_per_step"])


def _run_steps(device, n, fn) -> float:
    """A gap row's timer, untimed: the steps only."""
    for k in range(n):
        fn(k)
    return 1.0


def test_a_gap_row_steps_physics_then_puts_the_envs_state_back():
    from unilab.registry import make_manager_based_rl_env
    from unilab_bench import gap_rows

    env = make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=0)
    try:
        env.step(torch.zeros(2, env.action_dim))
        qpos = env.backend.views().qpos.clone()
        for row in (lambda: gap_rows.raw_with_torch_ops(env, 3, _run_steps, 4),
                    lambda: gap_rows.raw_with_state_write(env, 3, _run_steps)):
            before = env.backend.diagnostics()["physics_steps"]
            row()
            assert env.backend.diagnostics()["physics_steps"] - before == 3 * env.decimation
            assert torch.equal(env.backend.views().qpos, qpos)
    finally:
        env.close()


def test_the_replay_row_does_the_envs_physics_workload_and_leaves_the_env_where_it_got():
    from unilab.registry import make_manager_based_rl_env
    from unilab_bench import gap_rows

    seen = {}

    def run_steps(device, n, fn) -> float:
        _run_steps(device, n, fn)
        seen["replayed"] = env.backend.views().qpos.clone()
        return 1.0

    # Pushes every step and 4-step episodes: the window holds resets and velocity edits.
    env = make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=0,
                                    overrides=["events.push.interval_range_s=[0.02,0.02]", "episode_length_s=0.08"])
    try:
        zero = torch.zeros(2, env.action_dim)
        env.step(zero)
        before = env.backend.diagnostics()["physics_steps"]
        gap_rows.raw_replaying_env_writes(env, 6, run_steps, zero)
        assert env.backend.diagnostics()["physics_steps"] - before == 2 * 6 * env.decimation  # env, then replay
        # From the same start, physics plus the recorded writes reach the state the env reached,
        # and the env goes on from there.
        assert torch.equal(seen["replayed"], env.backend.views().qpos)
    finally:
        env.close()


def test_solver_iterations_compare_env_and_raw_steps_where_the_backend_reports_them():
    pytest.importorskip("mujoco_warp")
    from unilab.registry import make_manager_based_rl_env
    from unilab_bench import gap_rows

    mujoco_env = make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=0)
    try:
        assert gap_rows.solver_iterations(mujoco_env, torch.zeros(2, mujoco_env.action_dim), 2) is None
    finally:
        mujoco_env.close()
    env = make_manager_based_rl_env("g1_walk_flat", backend="mjwarp", num_envs=2, device="cpu", seed=0)
    try:
        env.step(torch.zeros(2, env.action_dim))
        out = gap_rows.solver_iterations(env, torch.zeros(2, env.action_dim), 3)
        assert set(out) == {"env", "raw"}
        for side in out.values():
            assert 1.0 <= side["mean_over_worlds"] <= side["max_over_worlds"]  # a standing G1 has contacts to solve
    finally:
        env.close()


def test_counting_ops_by_phase_puts_the_envs_own_timer_back():
    env = bench.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=0,
                                          overrides=["validate_actions=false"])
    try:
        timer, zeros = env.timer, torch.zeros(2, env.action_dim)
        by_phase = probes.kernel_ops_by_phase(env, zeros, steps=2)
        assert env.timer is timer and by_phase["step_total"] > by_phase["update_state"] > 0
    finally:
        env.close()


def test_the_record_counts_the_episodes_each_timed_window_ended(tmp_path, monkeypatch):
    # The replay row replays a window the env ran before its own timed one; the record says how
    # many episodes each window ended, so a reader can see whether the two workloads matched.
    steps = 12  # per timed window; the paired drift control times single steps
    ended: list[int] = []
    real = bench._time_steps

    def counting(device, n, fn):
        outputs = []
        seconds = real(device, n, lambda k: outputs.append(fn(k)))
        done = [(out[2] | out[3]).sum().item() for out in outputs if isinstance(out, tuple)]
        if done and n == steps:  # a streamed env row
            ended.append(int(sum(done)))
        return seconds

    monkeypatch.setattr(bench, "_time_steps", counting)
    out = tmp_path / "episodes.json"
    threads = torch.get_num_threads()
    try:
        bench.main(["--backend", "mujoco", "--num-envs", "4", "--steps", str(steps), "--warmup", "1", "--samples", "3",
                    "--compare-task", "", "--gap-rows", "--override", "episode_length_s=0.1", "--out", str(out)])
    finally:
        torch.set_num_threads(threads)
    episodes = json.loads(out.read_text())["episodes_ended_per_sample"]
    assert set(episodes) == {"raw_replaying_env_writes", "env_zero", "env_random"}
    assert ended
    timed = [e for pair in zip(episodes["env_zero"], episodes["env_random"], strict=True) for e in pair]
    assert timed == ended  # the env rows' windows, in the order they were timed
    assert len(episodes["raw_replaying_env_writes"]) == 3 and min(episodes["raw_replaying_env_writes"]) >= 4
