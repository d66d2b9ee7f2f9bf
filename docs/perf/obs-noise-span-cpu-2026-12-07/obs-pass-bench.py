"""Run on a tree with change.diff applied (the change was dropped; main lacks the attributes it
sets). One tracking env (mujoco, 1024 envs, torch on 1 thread): the observation pass with noise
drawn over the noisy span (the change) and over the whole frame (as before), interleaved in one
process on the same state. Prints ms per pass, min/median/max."""
import json, statistics, sys, time
import torch
from unilab.registry import make_manager_based_rl_env

torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
rounds, passes = 15, 20
env = make_manager_based_rl_env("g1_motion_tracking", backend="mujoco", num_envs=n, device="cpu", seed=0,
                                overrides=["validate_actions=false"])
env.reset()
act = torch.zeros(n, env.action_dim)
for _ in range(5):
    env.step(act)
om = env.observation_manager
noisy = [g for g in om.groups if g.has_noise]
span = {g.name: (g.noise_span, g.noise_shape, g.noise_lo_span, g.noise_width) for g in noisy}


def whole(g):  # the draw before this change: every column of the frame
    lo_all = g.noise_lo
    s = slice(0, lo_all.shape[0])
    full_width = torch.zeros_like(lo_all)
    full_width[g.noise_span] = g.noise_width
    return s, (n, lo_all.shape[0]), lo_all, full_width


full = {g.name: whole(g) for g in noisy}


def use(cfg):
    for g in noisy:
        g.noise_span, g.noise_shape, g.noise_lo_span, g.noise_width = cfg[g.name]


def time_pass(cfg):
    use(cfg)
    t = time.perf_counter()
    for _ in range(passes):
        om.compute(env, commit=False)
    return (time.perf_counter() - t) / passes * 1e3


out = {"span": [], "whole": []}
for r in range(rounds):
    order = ("span", "whole") if r % 2 == 0 else ("whole", "span")
    for k in order:
        out[k].append(time_pass(span if k == "span" else full))
use(span)
rec = {"num_envs": n, "rounds": rounds, "passes_per_sample": passes,
       "noisy_groups": {g.name: [g.noise_span.start, g.noise_span.stop, om.spec[g.name]] for g in noisy},
       "ms_per_pass": {k: {"min": min(v), "median": statistics.median(v), "max": max(v), "samples": v} for k, v in out.items()},
       "saved_ms_per_pass_paired": sorted(w - s for s, w in zip(out["span"], out["whole"]))}
print(json.dumps({k: v for k, v in rec.items() if k != "ms_per_pass"}, indent=1))
for k, v in rec["ms_per_pass"].items():
    print(k, "min %.3f median %.3f max %.3f" % (v["min"], v["median"], v["max"]))
json.dump(rec, open(sys.argv[2], "w"), indent=1) if len(sys.argv) > 2 else None
