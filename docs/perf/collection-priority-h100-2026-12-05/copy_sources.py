"""Which host ops launch the copy kernels of an eager learner update (FastSAC or FlashSAC)."""
import json, sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from unilab_rl.algorithms import build_agent
from unilab_rl.cli.bench import build_parser, bench_runner
from unilab_rl.cli.train import default_env_factory

out = Path(sys.argv[1])
args = build_parser().parse_args(["learner", *sys.argv[2:]])
factory, _ = default_env_factory()
env, spec, config, runner = bench_runner(args, factory)
batch = runner.replay.sample(config.batch_size)
eager = build_agent(args.algo, spec, config.model_copy(update={"cuda_graph": False}), spec.device)
eager.load_state_dict(runner.agent.state_dict())
for _ in range(16):
    eager.update(batch)
sync = torch.cuda.synchronize if spec.device.type == "cuda" else (lambda: None)
sync()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, with_stack=True) as prof:
    for _ in range(8):
        eager.update(batch)
    sync()
rows = defaultdict(lambda: [0.0, 0, ""])
for e in prof.events():
    if e.device_type.name != "CPU" or not e.kernels:
        continue
    for k in e.kernels:
        if "copy" in k.name.lower() or "memcpy" in k.name.lower():
            stack = [f for f in (e.stack or []) if "unilab" in f or "torch/_" in f][:6]
            key = (e.name, str(e.input_shapes)[:200], " | ".join(stack))
            rows[key][0] += k.duration / 8
            rows[key][1] += 1
ranked = sorted(rows.items(), key=lambda kv: -kv[1][0])
report = [{"op": k[0], "shapes": k[1], "stack": k[2], "device_us_per_update": v[0], "kernels": v[1] / 8} for k, v in ranked[:30]]
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(report, indent=1))
for r in report:
    print(f"{r['device_us_per_update']:8.1f} us {r['kernels']:5.2f}x {r['op']} {r['shapes'][:120]}\n      {r['stack'][:400]}")
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
env.close()
