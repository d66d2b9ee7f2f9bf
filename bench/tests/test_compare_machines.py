"""unilab-bench compare on records not measured alike (machines, widths, timing windows): refused
unless --counts-only, which judges the per-step counts alone; kernel ops and Python calls
reported, not judged."""

from __future__ import annotations

import json
from pathlib import Path

from unilab_bench import compare

CASE = "flashsac/g1_walk_flat/mjwarp"
H200 = "0, NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz, 700.00 W, Enabled"
H100 = "0, NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 1980 MHz, 700.00 W, Enabled"


def _side(rate=1000.0, syncs=0.0, kernel_ops=159.0):
    return {"status": "ok", "smoke": False, "samples": [
        {"env_steps_per_s_streamed": rate, "reset_done_ms": 1.0, "host_syncs_per_env_step": syncs,
         "redundant_physics_steps_in_reset": 0.0, "kernel_ops_per_env_step": kernel_ops,
         "python_calls_per_env_step": 513.0} for _ in range(3)]}


def _record(path: Path, side: dict, gpus=(H200,), device="cuda", num_envs=4096, cpu="Xeon", cpus=16,
            **timing) -> str:
    machine = {"gpus": list(gpus) if gpus else None, "cpu_model": cpu, "sched_affinity": cpus}
    settings = {"device": device, "num_envs": num_envs, "env_steps": 200, "env_warmup": 50,
                "collector_seconds": 2.0, "rounds": 3} | timing
    path.write_text(json.dumps({"benchmark": "unilab_bench.matrix", "machine": machine, "settings": settings,
                                "cases": {CASE: {"head": side}}}))
    return str(path)


def test_records_from_two_gpu_models_are_refused_naming_both(tmp_path, capsys):
    base = _record(tmp_path / "base.json", _side())
    head = _record(tmp_path / "head.json", _side(rate=1500.0), gpus=(H100,))
    assert compare.main([base, head]) == compare.EXIT_ERROR
    err = capsys.readouterr().err
    assert "NVIDIA H200" in err and "NVIDIA H100 80GB HBM3" in err and "--counts-only" in err


def test_a_baseline_from_another_machine_is_refused_too(tmp_path, capsys):
    base = _record(tmp_path / "base.json", _side())
    head = _record(tmp_path / "head.json", _side())
    baseline = _record(tmp_path / "line.json", _side(), num_envs=1024)
    assert compare.main([base, head]) == 0
    assert compare.main([base, head, "--baseline", baseline]) == compare.EXIT_ERROR
    assert "num_envs 1024 -> 4096" in capsys.readouterr().err


def test_records_differ_by_cpu_model_or_count_and_host_records_not_by_gpu(tmp_path):
    base = _record(tmp_path / "base.json", _side(), gpus=None, device="cpu", num_envs=64)
    same_cpu = _record(tmp_path / "same.json", _side(), gpus=(H100,), device="cpu", num_envs=64)
    fewer = _record(tmp_path / "fewer.json", _side(), gpus=None, device="cpu", num_envs=64, cpus=2)
    other = _record(tmp_path / "other.json", _side(), gpus=None, device="cpu", num_envs=64, cpu="EPYC")
    assert compare.main([base, same_cpu]) == 0
    assert compare.main([base, fewer]) == compare.EXIT_ERROR
    assert compare.main([base, other]) == compare.EXIT_ERROR
    gpu_run = _record(tmp_path / "gpu.json", _side())
    assert compare.main([gpu_run, _record(tmp_path / "gpu-epyc.json", _side(), cpu="EPYC")]) == compare.EXIT_ERROR


def test_records_timed_over_other_windows_are_refused_and_more_rounds_are_not(tmp_path, capsys):
    base = _record(tmp_path / "base.json", _side())
    assert compare.main([base, _record(tmp_path / "rounds.json", _side(), rounds=5)]) == 0
    assert compare.main([base, _record(tmp_path / "long.json", _side(), collector_seconds=4.0)]) == compare.EXIT_ERROR
    assert "collector_seconds 2.0 -> 4.0" in capsys.readouterr().err
    assert compare.main([base, _record(tmp_path / "warm.json", _side(), env_warmup=10)]) == compare.EXIT_ERROR


def test_counts_only_skips_throughput_and_still_blocks_a_new_host_sync(tmp_path, capsys):
    base = _record(tmp_path / "base.json", _side())
    slower = _record(tmp_path / "slow.json", _side(rate=100.0), gpus=(H100,))
    synced = _record(tmp_path / "sync.json", _side(syncs=1.0), gpus=(H100,))
    assert compare.main([base, slower, "--counts-only"]) == 0
    out = capsys.readouterr().out
    assert "per-step counts only" in out and "env_steps_per_s_streamed" not in out
    assert compare.main([base, synced, "--counts-only"]) == 2


def test_records_that_do_not_say_where_they_ran_are_compared():
    # Older records carry no machine or settings: nothing is known to differ.
    assert compare.measurement_differences(compare.measured_on({}), compare.measured_on({"settings": {"device": "cuda"}})) == []


def test_kernel_ops_and_python_calls_are_reported_and_do_not_change_the_verdict(tmp_path, capsys):
    base = _record(tmp_path / "base.json", _side())
    head = _record(tmp_path / "head.json", _side(kernel_ops=167.0))
    assert compare.main([base, head]) == 0
    out = capsys.readouterr().out
    assert f"| {CASE} | reported | kernel_ops_per_env_step | 159 -> 167 per step |" in out
    assert "python_calls_per_env_step | 513 -> 513 per step" in out
    result = compare.compare_case(CASE, _side(), _side(kernel_ops=167.0), paired=True)
    assert result["verdict"] == compare.PASS
    assert {"metric": "kernel_ops_per_env_step", "base": 159.0, "head": 167.0} in result["reported"]


def _lscpu(model: int, stepping: int) -> str:
    return f"Model name:   Intel(R) Xeon(R) Processor\nCPU family:   6\nModel:        {model}\nStepping:     {stepping}\n"


def test_hosts_whose_virtual_cpus_share_a_name_are_told_apart_by_family_model_and_stepping(tmp_path, capsys):
    def record(name: str, lscpu: str | None) -> str:
        path = Path(_record(tmp_path / name, _side(), gpus=(H100,), cpu="Intel(R) Xeon(R) Processor"))
        data = json.loads(path.read_text())
        data["machine"]["lscpu"] = lscpu
        path.write_text(json.dumps(data))
        return str(path)

    sapphire = record("a.json", _lscpu(143, 8))
    assert compare.main([sapphire, record("b.json", _lscpu(143, 8))]) == 0
    assert compare.main([sapphire, record("c.json", _lscpu(207, 2))]) == compare.EXIT_ERROR
    assert "cpu_family_model_stepping 6/143/8 -> 6/207/2" in capsys.readouterr().err
    # A record without lscpu (or one that lacks a field) says nothing about it: not a difference.
    assert compare.main([sapphire, record("d.json", None)]) == 0
    assert compare.main([sapphire, record("e.json", "CPU family: 6\nModel: 207\n")]) == 0
