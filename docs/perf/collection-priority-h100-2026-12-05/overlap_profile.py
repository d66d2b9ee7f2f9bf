"""How much of learning beside collection actually runs side by side on the GPU.

Builds the collector benchmark's runner (same arguments as `unilab-bench collector`), switches
learning beside collection on with the given env stream priority, warms up, then records the
kernels of N iterations with the torch profiler and reports, from the Chrome trace, each
stream's busy time (union of its kernel intervals), the time both streams had a kernel
running, and the time no kernel ran, per iteration.
"""
import argparse, json, sys, tempfile, time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from unilab_rl.cli.bench import build_parser, bench_runner, timed_rate
from unilab_rl.cli.train import default_env_factory


def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def length(u):
    return sum(e - s for s, e in u)


def intersect(a, b):
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if e > s:
            total += e - s
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def main():
    extra = argparse.ArgumentParser()
    extra.add_argument("--priority", type=int, default=0)
    extra.add_argument("--iterations", type=int, default=30)
    extra.add_argument("--out", type=Path, required=True)
    known, rest = extra.parse_known_args()
    args = build_parser().parse_args(["collector", *rest])
    factory, _ = default_env_factory()
    env, spec, config, runner = bench_runner(args, factory)
    runner.config.env_stream_priority = known.priority
    timed_rate(runner, 2.0, learn=True)
    runner.set_overlap_learning(True)
    timed_rate(runner, 2.0, learn=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(known.iterations):
            runner.collect_and_learn(True)
        runner.join_learner()
        torch.cuda.synchronize()
        wall = time.perf_counter() - start
    trace = Path(tempfile.mkdtemp()) / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    by_stream = {}
    for e in events:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e:
            by_stream.setdefault(e["args"].get("stream"), []).append((e["ts"], e["ts"] + e["dur"]))
    unions = {s: union(v) for s, v in by_stream.items()}
    everything = union([iv for v in by_stream.values() for iv in v])
    span = everything[-1][1] - everything[0][0]
    n = known.iterations
    report = {"priority": known.priority, "iterations": n, "wall_ms_per_iteration": wall * 1e3 / n,
              "span_ms_per_iteration": span / 1e3 / n,
              "any_kernel_ms_per_iteration": length(everything) / 1e3 / n,
              "streams": {str(s): {"kernels_per_iteration": len(by_stream[s]) / n,
                                   "busy_ms_per_iteration": length(u) / 1e3 / n,
                                   "kernel_sum_ms_per_iteration": sum(e - b for b, e in by_stream[s]) / 1e3 / n}
                          for s, u in unions.items()}}
    streams = sorted(unions, key=lambda s: -length(unions[s]))
    if len(streams) >= 2:
        a, b = streams[:2]
        report["both_busiest_streams_running_ms_per_iteration"] = intersect(unions[a], unions[b]) / 1e3 / n
    known.out.parent.mkdir(parents=True, exist_ok=True)
    known.out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))
    env.close()


if __name__ == "__main__":
    main()
