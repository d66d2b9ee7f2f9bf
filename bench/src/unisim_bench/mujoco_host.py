"""Benchmark: the mujoco adapter's step vs a raw mujoco.rollout loop, same threads, one process.

    python -m unisim_bench.mujoco_host --model G1_SCENE.xml --num-envs 64,1024 --out FILE.json

Raw = ``Rollout.rollout`` of ``substeps`` steps per env step with the final state fed back
(physics only, no derived quantities). Adapter = ``backend.step(ctrl, substeps)``, which
also publishes authoritative views (body poses/velocities, sensors) to torch. Samples of
raw and adapter are interleaved; min/median/max env-steps/s and the ratio of medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import mujoco
import numpy as np
import torch
import unisim
from mujoco import rollout

from unisim_bench.arguments import int_at_least, int_list_at_least, positive_seconds


def _raw_runner(model_path: str, num_envs: int, nthread: int, substeps: int):
    model = mujoco.MjModel.from_xml_path(model_path)
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    state = np.tile(state0, (num_envs, 1))
    ctrl = np.tile(data.ctrl, (num_envs, substeps, 1))
    out = np.empty((num_envs, substeps, state.shape[1]))
    sensors = np.empty((num_envs, substeps, model.nsensordata))
    pool = rollout.Rollout(nthread=nthread)
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    models = [model] * num_envs

    def step() -> None:
        pool.rollout(models, datas, state, ctrl, nstep=substeps, state=out, sensordata=sensors, skip_checks=True)
        state[:] = out[:, -1]

    return step, state0, state, pool


def _adapter_runner(model_path: str, num_envs: int, nthread: int, substeps: int):
    backend = unisim.create_backend("mujoco", model=model_path, num_envs=num_envs, nthread=nthread)
    inv = backend.inventory()
    if inv.keyframes:
        key = inv.keyframes[0]
        backend.set_state(torch.arange(num_envs), torch.tensor(key.qpos).float().repeat(num_envs, 1),
                          torch.tensor(key.qvel).float().repeat(num_envs, 1))
        ctrl = torch.tensor(key.ctrl).float().repeat(num_envs, 1)
    else:
        ctrl = torch.zeros(num_envs, inv.widths.nu)

    def step() -> None:
        backend.step(ctrl, substeps)

    return step, backend


def _time(step, iters: int) -> float:
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    return (time.perf_counter() - t0) / iters


def bench(model_path: str, num_envs: int, nthread: int, substeps: int, samples: int, iters: int) -> dict:
    raw_step, state0, raw_state, pool = _raw_runner(model_path, num_envs, nthread, substeps)
    adapter_step, backend = _adapter_runner(model_path, num_envs, nthread, substeps)
    qpos0 = backend.views().qpos.clone()
    qvel0 = backend.views().qvel.clone()
    rows = torch.arange(num_envs)
    raw_rates, adapter_rates = [], []
    _time(raw_step, 2)
    _time(adapter_step, 2)
    for _ in range(samples):
        # Both restart from the keyframe each sample so neither times a fallen robot.
        raw_state[:] = state0
        raw_rates.append(num_envs / _time(raw_step, iters))
        backend.set_state(rows, qpos0, qvel0)
        adapter_rates.append(num_envs / _time(adapter_step, iters))
    backend.close()
    pool.close()

    def stats(xs: list[float]) -> dict:
        return {"min": min(xs), "median": statistics.median(xs), "max": max(xs)}

    # Adjacent raw/adapter samples share the machine's load at that moment: their ratio is
    # robust to drift on a shared box, the ratio of medians is not.
    paired = [a / r for a, r in zip(adapter_rates, raw_rates, strict=True)]
    return {"num_envs": num_envs, "nthread": nthread, "substeps": substeps, "iters_per_sample": iters,
            "raw_env_steps_per_s": stats(raw_rates), "adapter_env_steps_per_s": stats(adapter_rates),
            "ratio_median": statistics.median(adapter_rates) / statistics.median(raw_rates),
            "paired_ratio": stats(paired)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="MJCF path (default: the built-in model)")
    parser.add_argument("--num-envs", type=int_list_at_least(1), default=[64, 1024], help="comma-separated")
    parser.add_argument("--nthread", type=int_at_least(1), default=len(os.sched_getaffinity(0)))
    parser.add_argument("--substeps", type=int_at_least(1), default=4)
    parser.add_argument("--samples", type=int_at_least(1), default=5)
    parser.add_argument("--seconds", type=positive_seconds, default=1.0, help="approximate time per sample")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from unisim.conformance import BUILTIN_MODEL

    model = args.model or str(BUILTIN_MODEL)
    results = []
    if not args.num_envs:
        parser.error("--num-envs: expected at least one env count")
    for n in args.num_envs:
        probe_step, *_ = _raw_runner(model, n, args.nthread, args.substeps)
        per_iter = _time(probe_step, 2)
        iters = max(3, int(args.seconds / per_iter))
        r = bench(model, n, args.nthread, args.substeps, args.samples, iters)
        results.append(r)
        print(f"num_envs={n:5d} raw {r['raw_env_steps_per_s']['median']:9.0f} env-steps/s  adapter "
              f"{r['adapter_env_steps_per_s']['median']:9.0f}  ratio {r['ratio_median']:.3f}  paired ratio "
              f"{r['paired_ratio']['min']:.3f}/{r['paired_ratio']['median']:.3f}/{r['paired_ratio']['max']:.3f}  "
              f"(adapter min/max {r['adapter_env_steps_per_s']['min']:.0f}/{r['adapter_env_steps_per_s']['max']:.0f})")
    record = {
        "benchmark": "mujoco adapter step vs raw mujoco.rollout", "model": model,
        "date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
        "cores": len(os.sched_getaffinity(0)), "mujoco_version": mujoco.__version__, "torch_version": torch.__version__,
        "git_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
        "command": "python -m unisim_bench.mujoco_host " + " ".join(
            f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in vars(args).items() if v is not None),
        "results": results,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
