"""Learning beside collection with the learner's stream in a CUDA green context of N SMs.

Usage: python green_collector.py OUT.json SMS [bench collector args...]
SMS: comma-separated SM counts for the learner's green context (0 = the ordinary stream).
Interleaved rounds: env alone, then each SM count's overlapped collector rate.
"""
import json
import statistics
import sys
import traceback

import torch

from unilab_rl.cli.bench import build_parser, bench_runner, timed_env_alone_rate, timed_rate
from unilab_rl.cli.train import default_env_factory

out = sys.argv[1]
sm_counts = [int(s) for s in sys.argv[2].split(",")]
args = build_parser().parse_args(["collector", *sys.argv[3:]])
factory, _ = default_env_factory()
env, spec, config, runner = bench_runner(args, factory)
props = torch.cuda.get_device_properties(spec.device)
record = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
          "argv": sys.argv, "sm_counts": sm_counts, "errors": {}}
from torch.cuda import green_contexts as gc  # noqa: E402

record["has_stream_method"] = hasattr(gc.GreenContext, "Stream")
green_streams = {}
for n in sm_counts:
    if n == 0:
        continue
    try:
        try:
            ctx = gc.GreenContext.create(num_sms=n, device_id=spec.device.index or 0)
        except TypeError:
            ctx = gc.GreenContext.create(n, spec.device.index or 0)
        if hasattr(ctx, "Stream"):
            stream = ctx.Stream()
        else:
            ctx.set_context()
            stream = torch.cuda.Stream(spec.device)
            ctx.pop_context()
        green_streams[n] = (ctx, stream)
    except Exception:
        record["errors"][str(n)] = traceback.format_exc()
print("green streams", list(green_streams), record["errors"], flush=True)


def overlapped(n: int, seconds: float) -> float:
    runner.set_overlap_learning(True)
    if n:
        runner.learner_stream.stream = green_streams[n][1]
    rate = timed_rate(runner, seconds, learn=True)
    runner.set_overlap_learning(False)
    return rate


counts = [n for n in sm_counts if n == 0 or n in green_streams]
try:
    timed_rate(runner, 2.0, learn=True)
    for n in counts:
        overlapped(n, 1.0)
    alone, rates = [], {n: [] for n in counts}
    for r in range(args.samples):
        alone.append(timed_env_alone_rate(runner, args.seconds, "zero"))
        for n in counts:
            rates[n].append(overlapped(n, args.seconds))
        print("round", r, alone[-1], {n: v[-1] for n, v in rates.items()}, flush=True)
    record["env_alone"] = alone
    record["overlapped"] = {str(n): v for n, v in rates.items()}
    record["of_env_alone_median"] = {str(n): statistics.median(a / b for a, b in zip(v, alone)) for n, v in rates.items()}
    record["median"] = {str(n): statistics.median(v) for n, v in rates.items()}
finally:
    env.close()
    json.dump(record, open(out, "w"), indent=1)
print(json.dumps({k: record.get(k) for k in ("device", "sms", "has_stream_method", "median", "of_env_alone_median")}))
