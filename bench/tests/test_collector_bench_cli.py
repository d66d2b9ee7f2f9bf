"""unilab-bench collector and learner on the fake env: both modes timed, a preset's learner
settings under the command line's, op and sync counts, bad counts refused before anything is built."""

from __future__ import annotations

import json

import pytest
from helpers import TINY
from test_cli import TINY_TOKENS, fake_factory
from unilab_bench import cli as bench_cli
from unilab_bench import collector as collector_bench


def collector_argv(record_path, seconds: float, samples: int) -> list[str]:
    """The collector benchmark on the fake env with a tiny FlashSAC learning from the first step."""
    tokens = [f"{k}={v}" for k, v in TINY["flashsac"].items() if k != "learning_starts"]
    return ["collector", "--backend", "fake", "--task", "fake_task", "--num-envs", "8", "--seconds", str(seconds),
            "--samples", str(samples), "--json", str(record_path), *tokens]


def test_bench_reports_both_modes(tmp_path, capsys):
    record_path = tmp_path / "bench.json"
    argv = collector_argv(record_path, seconds=0.2, samples=2)
    assert bench_cli.main(argv, factory=fake_factory) == 0
    record = json.loads(record_path.read_text())
    assert record["env_steps_per_s_no_learning"]["median"] > 0
    assert record["machine"]["sched_affinity"] >= 1 and "lscpu" in record["machine"]
    assert record["env_steps_per_s_with_learning"]["median"] > 0
    # Each mode as a fraction of the env alone of its own round, in the same process.
    alone, learning = record["raw"]["env_alone"], record["raw"]["with_learning"]
    assert len(alone) == 2 and min(alone) > 0
    ratios = sorted(c / e for c, e in zip(learning, alone, strict=True))
    assert record["of_env_alone"]["with_learning"]["min"] == ratios[0]
    assert record["of_env_alone"]["with_learning"]["max"] == ratios[1]
    assert "with_learning_overlapped" not in record["of_env_alone"]
    replaying = record["raw"]["env_alone_replaying_actions"]
    assert len(replaying) == 2 and min(replaying) > 0
    assert record["of_env_alone_replaying_actions"]["no_learning"]["median"] > 0
    assert len(record["raw"]["with_learning"]) == 2
    # Learning beside collection needs CUDA streams: on the host it is not timed, and says so.
    assert record["env_steps_per_s_with_learning_overlapped"] is None
    assert record["overlapped_learning_cost_ratio"] is None and record["raw"]["with_learning_overlapped"] == []
    assert record["env_stream_priorities"] == [-5]  # the runner's default
    assert record["env_steps_per_s_with_learning_overlapped_by_env_priority"] is None
    printed = capsys.readouterr().out
    assert "collector with_learning " in printed and "overlapped" not in printed
    assert "collector env_alone " in printed and "of the env alone" in printed
    dispatch = record["dispatch_per_collector_step"]
    assert dispatch["kernel_ops_per_collector_step"] > 0
    assert dispatch["host_syncs_per_collector_step"] >= 1  # the fake env reads its return sum on the host


def test_bench_prints_learning_beside_collection_per_env_priority(tmp_path, capsys, monkeypatch):
    """On CUDA the overlapped mode is timed per priority; the host has no streams, so the record a
    CPU run writes is given the overlapped figures a GPU run adds, and main prints them."""
    record_path = tmp_path / "bench.json"
    argv = collector_argv(record_path, seconds=0.1, samples=1)
    assert bench_cli.main(argv, factory=fake_factory) == 0
    record = json.loads(record_path.read_text())
    stats = {"0": {"min": 90.0, "median": 100.0, "max": 110.0}, "-5": {"min": 95.0, "median": 104.0, "max": 120.0}}
    record.update({"env_steps_per_s_with_learning_overlapped": stats["0"], "overlapped_learning_cost_ratio": 0.5,
                   "env_steps_per_s_with_learning_overlapped_by_env_priority": stats})
    record["of_env_alone"]["with_learning_overlapped"] = record["of_env_alone"]["with_learning"]
    record["of_env_alone_replaying_actions"]["with_learning_overlapped"] = record["of_env_alone"]["with_learning"]
    monkeypatch.setattr(collector_bench, "bench_collector", lambda args, factory: record)
    capsys.readouterr()
    assert bench_cli.main(argv, factory=fake_factory) == 0
    printed = capsys.readouterr().out
    assert "beside collection by env stream priority (median env-steps/s): 0: 100, -5: 104" in printed


@pytest.mark.parametrize("value", ["1", "0,x", ",", "0,0", "-5,0,-5"])
def test_bench_refuses_env_priorities_that_are_not_integers_at_most_0(value, capsys):
    built = []
    with pytest.raises(SystemExit) as exit_info:
        bench_cli.main(["collector", "--backend", "fake", "--task", "fake_task", "--env-priorities", value],
                       factory=lambda *a, **k: built.append(a))
    assert exit_info.value.code == 2 and not built
    assert "--env-priorities" in capsys.readouterr().err


def test_bench_starts_from_the_gpu_walk_preset_and_still_learns_at_once(tmp_path):
    record_path = tmp_path / "bench.json"
    small = ["actor_width=16", "critic_width=16", "actor_blocks=1", "critic_blocks=1", "critic_bins=21",
             "compile=false", "replay_capacity_per_env=1100"]
    argv = ["collector", "--backend", "fake", "--task", "fake_task", "--num-envs", "8", "--seconds", "0.2",
            "--samples", "1", "--json", str(record_path), "--preset", "gpu_walk", *small]
    assert bench_cli.main(argv, factory=fake_factory) == 0
    record = json.loads(record_path.read_text())
    assert record["algo_config"]["batch_size"] == 8192  # from the preset
    assert record["algo_config"]["actor_width"] == 16  # the command line wins over the preset
    assert record["algo_config"]["learning_starts"] == 0
    assert record["phase_ms_with_learning"]["learner_ms"] > 0


def test_bench_learner_times_draws_and_updates_and_counts_their_ops(tmp_path, capsys):
    record_path = tmp_path / "learner.json"
    argv = ["learner", "--backend", "fake", "--task", "fake_task", "--num-envs", "8", "--calls", "3",
            "--samples", "2", "--json", str(record_path), *TINY_TOKENS, "batch_size=16", "updates_per_step=4"]
    assert bench_cli.main(argv, factory=fake_factory) == 0
    record = json.loads(record_path.read_text())
    assert record["benchmark"] == "learner" and record["batch_size"] == 16 and record["updates_per_env_step"] == 4
    for name in ("draw", "update", "draw_and_update", "step_of_updates"):
        times = record["ms_per_call"][name]
        assert times["issue"]["min"] > 0 and times["wall"]["min"] > 0
        assert len(record["raw"]["wall_ms"][name]) == 2
    assert record["updates_from_cuda_graphs"] is False  # CUDA graphs need a GPU
    update, draw = record["per_call_dispatch"]["eager_update"], record["per_call_dispatch"]["draw"]
    assert update["kernel_ops"] > draw["kernel_ops"] > 0
    assert draw["host_syncs"] == 0  # a draw never waits for the device
    # one draw for an env step's 4 updates dispatches a quarter of the ops per update
    together = record["per_call_dispatch"]["draw_per_update_in_one_step"]
    assert together["kernel_ops"] == pytest.approx(draw["kernel_ops"] / 4, rel=0.05)
    assert update["device_ms"] is None and draw["device_events"] is None  # the profiler's part needs CUDA
    assert update["heaviest_kernels"] is None
    printed = capsys.readouterr().out
    assert "draw_and_update" in printed and "kernel ops" in printed


def test_bench_learner_refuses_bad_counts_before_building_anything(tmp_path, capsys):
    record_path = tmp_path / "learner.json"

    def no_factory(*args, **kwargs):
        raise AssertionError("the env must not be built for bad arguments")

    argv = ["learner", "--backend", "fake", "--task", "fake_task", "--calls", "0", "--json", str(record_path)]
    assert bench_cli.main(argv, factory=no_factory) == 2
    assert "--calls must be >= 1, got 0" in capsys.readouterr().err
    assert not record_path.exists()


def test_a_record_path_that_cannot_be_written_is_refused_before_the_benchmark_runs(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("")

    def no_factory(*args, **kwargs):
        raise AssertionError("the env must not be built when the record cannot be written")

    argv = ["collector", "--backend", "fake", "--task", "fake_task", "--json", str(blocker / "x.json")]
    assert bench_cli.main(argv, factory=no_factory) == 2
    assert f"--json {blocker} is not writable: {blocker} is a file" in capsys.readouterr().err


def test_heaviest_kernels_ranks_names_by_their_summed_device_time_per_call():
    from unilab_bench.learner import heaviest_kernels

    # two calls: "gemm" launches twice per call at 30 us, "norm" four times at 10 us, "copy" once at 50 us
    launches = [("gemm", 30.0)] * 4 + [("norm", 10.0)] * 8 + [("copy", 50.0)]
    ranked = heaviest_kernels(launches, calls=2)
    assert [k["name"] for k in ranked] == ["gemm", "norm", "copy"]
    assert ranked[0] == {"name": "gemm", "events": 2.0, "device_ms": pytest.approx(0.060)}
    assert ranked[1]["events"] == 4.0 and ranked[1]["device_ms"] == pytest.approx(0.040)
    assert ranked[2]["device_ms"] == pytest.approx(0.025)
    assert [k["name"] for k in heaviest_kernels(launches, calls=2, count=1)] == ["gemm"]


@pytest.mark.parametrize(("flag", "value"), [("--seconds", "-1"), ("--seconds", "nan"), ("--samples", "0")])
def test_bench_refuses_bad_numbers_before_building(tmp_path, capsys, flag, value):
    built = []

    def factory(*args, **kwargs):
        built.append(args)
        return fake_factory(*args, **kwargs)

    argv = ["collector", "--backend", "fake", "--task", "fake_task", "--json", str(tmp_path / "b.json"), flag, value]
    assert bench_cli.main(argv, factory=factory) == 2  # bad input
    assert f"{flag} must be" in capsys.readouterr().err
    assert not built and not (tmp_path / "b.json").exists()


def test_the_collector_benchmark_refuses_an_ambiguous_key_before_building(capsys):
    pytest.importorskip("unilab")

    def no_env(*args, **kwargs):
        raise AssertionError("an env was built for a command whose overrides were refused")

    assert collector_bench.main(["collector", "--task", "g1_walk_flat", "cuda_graph=true"], factory=no_env) == 2
    assert "override 'cuda_graph': ambiguous, it is both algo.cuda_graph" in capsys.readouterr().err
