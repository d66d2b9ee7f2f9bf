"""Where FastSAC's learner time goes (gpu_walk preset, 4096 envs, mjwarp): sampling vs graphed update,
host time to issue vs GPU time, eager kernel count and GPU time per update variant."""
import json, sys, time, os
import torch
from unilab_rl.algorithms import build_agent, lookup
from unilab_rl.cli.overrides import split_overrides, validated
from unilab_rl.cli.train import default_env_factory
from unilab_rl.contract import EnvSpec
from unilab_rl.presets import lookup_preset
from unilab_rl.runner import OffPolicyRunner, RunIdentity, RunnerConfig

algo_name = sys.argv[1] if len(sys.argv) > 1 else "fastsac"
extra = sys.argv[2:]
out = {}
factory, _ = default_env_factory()
algorithm = lookup(algo_name)
tuned = lookup_preset("gpu_walk").overrides_for(algo_name)
preset = split_overrides(tuned, algorithm.config_class, RunnerConfig)
extra_split = split_overrides(extra, algorithm.config_class, RunnerConfig)
BK, DV, NE = os.environ.get("PB", "mjwarp"), os.environ.get("PD", "cuda"), int(os.environ.get("PN", "4096"))
env = factory("g1_walk_flat", backend=BK, num_envs=NE, device=DV, seed=0, overrides={**preset.env, **({} if DV == "cuda" else {"cuda_graph": False})})
spec = EnvSpec.from_env(env)

def make(cuda_graph):
    cfg = validated(algorithm.config_class, {**preset.algo, "learning_starts": 0, "cuda_graph": cuda_graph}, extra_split.algo, "algorithm")
    agent = build_agent(algo_name, spec, cfg, spec.device)
    return cfg, agent

cfg, agent = make(True)
runner = OffPolicyRunner(env, agent, cfg, RunIdentity("g1_walk_flat", BK, algo_name, 0), None,
                         runner_config=validated(RunnerConfig, {"timing_sample_every": 1_000_000}, {}, "runner"))
for _ in range(64):
    runner.collector.step()
replay = runner.replay
B = cfg.batch_size
sync = torch.cuda.synchronize if DV == "cuda" else (lambda: None)

def timed(fn, n):
    sync(); t0 = time.perf_counter()
    for _ in range(n): fn()
    t_issue = time.perf_counter() - t0
    sync(); t1 = time.perf_counter() - t0
    return 1e3 * t_issue / n, 1e3 * t1 / n

batch = replay.sample(B)
for _ in range(12): agent.update(batch)  # warm-up and capture both variants (compile too)
REPS, N = (3, 200) if DV == "cuda" else (1, 3)
for rep in range(REPS):
    out.setdefault("sample_issue_ms_wall_ms", []).append(timed(lambda: replay.sample(B), N))
    out.setdefault("graphed_update_static_batch_issue_wall_ms", []).append(timed(lambda: agent.update(batch), N))
    out.setdefault("sample_plus_graphed_update_issue_wall_ms", []).append(timed(lambda: agent.update(replay.sample(B)), N))
print(json.dumps(out, indent=1), flush=True)

# eager kernel profile of each variant
from torch.profiler import profile, ProfilerActivity
cfg_e, agent_e = make(False)
agent_e.load_state_dict(agent.state_dict())
for _ in range(8): agent_e.update(batch)
out["eager_update_issue_wall_ms"] = timed(lambda: agent_e.update(batch), 40)
sync()
for name, fn, n in [("update x8 (2 with actor)", lambda: agent_e.update(batch), 8), ("sample", lambda: replay.sample(B), 8)]:
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(n): fn()
        sync()
    kern = [e for e in prof.events() if e.device_type.name == "CUDA"]
    total_us = sum(e.device_time for e in kern) if kern and hasattr(kern[0], "device_time") else sum(e.cuda_time for e in kern)
    out[f"profile {name}"] = {"kernels_per_call": len(kern) / n, "kernel_gpu_ms_per_call": total_us / 1e3 / n}
    table = prof.key_averages().table(sort_by="self_cuda_time_total" if hasattr(prof.key_averages()[0], "self_cuda_time_total") else "self_device_time_total", row_limit=25)
    print(name, "\n", table, flush=True)
print(json.dumps(out, indent=1))
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), f"prof-{algo_name}.json"), "w"), indent=1)
env.close()
