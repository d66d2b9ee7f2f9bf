"""Backend benchmark: raw mujoco_warp graph replay vs the mjwarp adapter, set_state cost, Genesis.

    python -m unisim_bench.backend --model G1_SCENE.xml --device cuda --envs 1024,4096,8192 \
        --out bench.json [--genesis-envs 1024,4096,8192]

Raw = ``wp.capture_launch`` of a graph of ``substeps`` x ``mjw.step`` on a separate Data of
the same model and size (physics only; views describe the pre-integration state). Adapter =
``backend.step(ctrl, substeps)``: ctrl copy, the same substeps plus the publish pass
(kinematics, sensors, body-origin velocities) in one graph, with the contract's validation
(``validate=True``: one device sync for the finite check) and without it (hot-loop mode).
Raw and adapter samples are interleaved, each row restarting from the start state; each
sample times ``iters`` env steps between two device synchronisations. set_state: ``rows``
random distinct rows (1/5/25% by default), per call, validated or not, and by mask
(``set_state_where``, not validated); the physics-step counter must not move. Every figure is
min/median/max over ``samples`` samples; a JSON record keeps the commit, versions and GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
import unisim

from unisim_bench.arguments import int_at_least, int_list_at_least


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def _timed(fn: Callable[[], None], iters: int, device: torch.device) -> float:
    """Seconds per call, averaged over ``iters`` calls between two device syncs."""
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / iters


def _start_state(backend: unisim.SimBackend) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(qpos, qvel, ctrl) rows of the model's first keyframe, or qpos0 with zero ctrl."""
    inv, n, dev = backend.inventory(), backend.num_envs, backend.device
    _, nv, nu = inv.widths
    if inv.keyframes:
        key = inv.keyframes[0]
        q, v, c = (torch.tensor(x, dtype=torch.float32) for x in (key.qpos, key.qvel, key.ctrl))
    else:
        q, v, c = backend.views().qpos[0].cpu().clone(), torch.zeros(nv), torch.zeros(nu)
    return q.repeat(n, 1).to(dev), v.repeat(n, 1).to(dev), c.repeat(n, 1).to(dev)


def _raw_mjwarp(model_path: str, num_envs: int, device: torch.device, substeps: int, key_qpos: torch.Tensor):
    """A raw mujoco_warp Data of the same model and size, and a replay of a captured graph."""
    import mujoco
    import mujoco_warp as mjw
    import warp as wp
    from unisim.adapters.warp_support import default_buffer_sizes, warp_device

    mjm = mujoco.MjModel.from_xml_path(model_path)
    dev = warp_device(device)
    with wp.ScopedDevice(dev):
        m = mjw.put_model(mjm)
        nconmax, njmax = default_buffer_sizes(mjm)  # the adapter's default buffer sizes
        d = mjw.make_data(mjm, nworld=num_envs, nconmax=nconmax, njmax=njmax)
        wp.to_torch(d.qpos).copy_(key_qpos)
        if mjm.nkey:
            wp.to_torch(d.ctrl).copy_(torch.tensor(mjm.key_ctrl[0], dtype=torch.float32).repeat(num_envs, 1))
        mjw.forward(m, d)
        mjw.step(m, d)  # compile before capture
        with wp.ScopedCapture(device=dev) as cap:
            for _ in range(substeps):
                mjw.step(m, d)
    wp.synchronize_device(dev)
    graph = cap.graph
    return lambda: wp.capture_launch(graph), (m, d)


def _restart_raw(data, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
    """Put the raw Data back to the start state (the fields the adapter's set_state writes).
    Each sample restarts both sides: otherwise raw physics times a robot that has drifted or
    fallen over every earlier sample, beside an adapter that is always near its start."""
    import warp as wp

    wp.to_torch(data.qpos).copy_(qpos)
    wp.to_torch(data.qvel).copy_(qvel)
    for field in (data.time, data.act, data.qacc_warmstart):
        wp.to_torch(field).zero_()


def bench_mjwarp(model: str, num_envs: int, device: torch.device, substeps: int, iters: int, samples: int,
                 fractions: list[float]) -> dict[str, Any]:
    t0 = time.perf_counter()
    backend = unisim.create_backend("mjwarp", model=model, num_envs=num_envs, device=device)
    qpos, qvel, ctrl = _start_state(backend)
    rows_all = torch.arange(num_envs, device=device)
    backend.set_state(rows_all, qpos, qvel)
    backend.step(ctrl, substeps)  # captures the graph for this substeps value
    raw_step, keep_alive = _raw_mjwarp(model, num_envs, device, substeps, qpos)
    raw_step()
    build_s = time.perf_counter() - t0

    def adapter_step() -> None:
        backend.step(ctrl, substeps)

    rates: dict[str, list[float]] = {"raw_graph": [], "adapter_validate": [], "adapter_no_validate": []}
    for _ in range(samples):  # interleaved: raw, adapter(validated), adapter(hot loop)
        # Every row times the same ``iters`` steps from the start state: the cost of a step
        # depends on the state (a robot settling onto the ground takes more solver iterations
        # than one at rest), so a row that went on from where another stopped is not comparable.
        _restart_raw(keep_alive[1], qpos, qvel)
        rates["raw_graph"].append(num_envs / _timed(raw_step, iters, device))
        for validate, row in ((True, "adapter_validate"), (False, "adapter_no_validate")):
            backend.validate = True
            backend.set_state(rows_all, qpos, qvel)
            backend.validate = validate
            rates[row].append(num_envs / _timed(adapter_step, iters, device))
    backend.validate = True
    raw_median = statistics.median(rates["raw_graph"])
    result: dict[str, Any] = {
        "num_envs": num_envs, "substeps": substeps, "iters_per_sample": iters, "samples": samples,
        "build_and_capture_s": build_s,
        "env_steps_per_s": {k: _stats(v) for k, v in rates.items()},
        "ratio_adapter_to_raw_median": {k: statistics.median(v) / raw_median for k, v in rates.items()
                                        if k != "raw_graph"},
        "set_state": bench_set_state(backend, qpos, qvel, fractions, samples),
        "diagnostics": backend.diagnostics(),
    }
    del keep_alive
    backend.close()
    return result


def bench_set_state(backend: unisim.SimBackend, qpos: torch.Tensor, qvel: torch.Tensor, fractions: list[float],
                    samples: int, calls: int = 50) -> dict[str, Any]:
    n, device = backend.num_envs, backend.device
    g = torch.Generator(device="cpu").manual_seed(0)
    out: dict[str, Any] = {}
    for frac in fractions:
        k = max(1, round(frac * n))
        rows = torch.randperm(n, generator=g)[:k].sort().values.to(device)
        q, v = qpos[:k].clone(), qvel[:k].clone()
        mask = torch.zeros(n, dtype=torch.bool, device=device)
        mask[rows] = True
        calls_by_mode = {  # (validate, call): set_state by rows, and the masked form (contract 1.1)
            "validate": (True, lambda r=rows, q=q, v=v: backend.set_state(r, q, v)),
            "no_validate": (False, lambda r=rows, q=q, v=v: backend.set_state(r, q, v)),
            "masked_no_validate": (False, lambda m=mask: backend.set_state_where(m, qpos, qvel)),
        }
        steps_before = int(backend.diagnostics()["physics_steps"])
        ms: dict[str, list[float]] = {mode: [] for mode in calls_by_mode}
        for _ in range(samples):
            for mode, (validate, call) in calls_by_mode.items():
                backend.validate = validate
                ms[mode].append(1e3 * _timed(call, calls, device))
        backend.validate = True
        out[f"{frac:g}"] = {
            "rows": k, "calls_per_sample": calls, "ms_per_call": {m: _stats(t) for m, t in ms.items()},
            "physics_steps_during_set_state": int(backend.diagnostics()["physics_steps"]) - steps_before,
        }
    return out


def bench_genesis(model: str, num_envs: int, device: torch.device, substeps: int, iters: int, samples: int,
                  fractions: list[float]) -> dict[str, Any]:
    t0 = time.perf_counter()
    backend = unisim.create_backend("genesis", model=model, num_envs=num_envs, device=device)
    qpos, qvel, ctrl = _start_state(backend)
    rows_all = torch.arange(num_envs, device=device)
    backend.set_state(rows_all, qpos, qvel)
    backend.step(ctrl, substeps)
    build_s = time.perf_counter() - t0
    rates: list[float] = []
    for _ in range(samples):
        # Every sample times the same steps from the start state, as the mjwarp rows do: one that
        # went on from where the last stopped would time a robot that fell or came to rest.
        backend.validate = True
        backend.set_state(rows_all, qpos, qvel)
        backend.validate = False
        rates.append(num_envs / _timed(lambda: backend.step(ctrl, substeps), iters, device))
        backend.validate = True
    result = {
        "num_envs": num_envs, "substeps": substeps, "iters_per_sample": iters, "samples": samples,
        "build_s": build_s, "env_steps_per_s_no_validate": _stats(rates),
        "set_state": bench_set_state(backend, qpos, qvel, fractions, samples, calls=10),
    }
    backend.close()
    return result


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "torch": torch.__version__}
    for dist in ("mujoco", "mujoco-warp", "warp-lang", "genesis-world"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _print_set_state(res: dict[str, Any]) -> None:
    for frac, r in res["set_state"].items():
        ms = r["ms_per_call"]
        print(f"  set_state {frac:>5} ({r['rows']} rows): {ms['no_validate']['median']:.3f} ms "
              f"(validated {ms['validate']['median']:.3f} ms, masked {ms['masked_no_validate']['median']:.3f} ms), "
              f"physics steps {r['physics_steps_during_set_state']}", flush=True)


def _print_mjwarp(res: dict[str, Any]) -> None:
    s = res["env_steps_per_s"]
    print(f"mjwarp {res['num_envs']:6d} envs: raw {s['raw_graph']['median']:,.0f}  adapter "
          f"{s['adapter_no_validate']['median']:,.0f} (validated {s['adapter_validate']['median']:,.0f}) "
          f"env-steps/s, ratio {res['ratio_adapter_to_raw_median']}", flush=True)
    _print_set_state(res)


def _print_genesis(res: dict[str, Any]) -> None:
    print(f"genesis {res['num_envs']:6d} envs: {res['env_steps_per_s_no_validate']['median']:,.0f} env-steps/s "
          f"(build {res['build_s']:.1f} s)", flush=True)
    _print_set_state(res)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="MJCF path (the G1 scene)")
    p.add_argument("--device", default=None)
    p.add_argument("--envs", type=int_list_at_least(1), default=[1024, 4096, 8192], help="comma-separated")
    p.add_argument("--genesis-envs", type=int_list_at_least(1), default=[],
                   help="comma-separated; empty skips Genesis")
    p.add_argument("--substeps", type=int_at_least(1), default=4)
    p.add_argument("--iters", type=int_at_least(1), default=100)
    p.add_argument("--genesis-iters", type=int_at_least(1), default=20)
    p.add_argument("--samples", type=int_at_least(1), default=3)
    p.add_argument("--fractions", default="0.01,0.05,0.25")
    p.add_argument("--budget-s", type=float, default=1e9, help="skip what is left once this much time has passed")
    p.add_argument("--commit", default=None)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    device = unisim.resolve_device(args.device)
    fractions = [float(x) for x in args.fractions.split(",")]
    start = time.perf_counter()
    record: dict[str, Any] = {
        "benchmark": "unisim_bench.backend (mjwarp raw graph vs adapter; set_state; genesis)",
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, "-m", "unisim_bench.backend", *(argv or sys.argv[1:])]),
        "commit": args.commit or _commit(), "versions": _versions(), "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "model": Path(args.model).name, "mjwarp_runs": [], "genesis_runs": [], "skipped": [],
    }

    def save() -> None:
        Path(args.out).write_text(json.dumps(record, indent=2))

    runs = [("mjwarp_runs", n, bench_mjwarp, args.iters, _print_mjwarp) for n in args.envs] + \
        [("genesis_runs", n, bench_genesis, args.genesis_iters, _print_genesis) for n in args.genesis_envs]
    for key, n, run, iters, report in runs:
        if time.perf_counter() - start > args.budget_s:
            record["skipped"].append(f"{key}@{n}: time budget spent")
            continue
        try:
            res = run(args.model, n, device, args.substeps, iters, args.samples, fractions)
            report(res)
            record[key].append(res)
        except Exception as exc:  # noqa: BLE001 - one failed size must not lose the others' figures
            record["skipped"].append(f"{key}@{n}: {type(exc).__name__}: {exc}")
            print(f"{key}@{n} failed: {exc}", flush=True)
        save()
    record["total_s"] = time.perf_counter() - start
    save()
    return record


if __name__ == "__main__":
    main()
