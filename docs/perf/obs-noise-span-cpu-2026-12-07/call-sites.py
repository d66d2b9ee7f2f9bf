"""Where the tracking env's manager work goes on the host (mujoco, torch on 1 thread): wall time
of each call site of a few op families (cat, stack, where, cross, vector norm, rand) over 5 env
steps after 5 warm-up steps, by caller file and line. Run on the tree before the change."""
import collections
import sys
import time

import torch
from unilab.registry import make_manager_based_rl_env

torch.set_num_threads(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
env = make_manager_based_rl_env("g1_motion_tracking", backend="mujoco", num_envs=n, device="cpu", seed=0,
                                overrides=["validate_actions=false"])
env.reset()
act = torch.zeros(n, env.action_dim)
for _ in range(5):
    env.step(act)
sites = collections.defaultdict(lambda: [0.0, 0, None])


def timed(name, fn):
    def call(*args, **kw):
        t = time.perf_counter()
        out = fn(*args, **kw)
        dt = time.perf_counter() - t
        caller = sys._getframe(1)
        site = sites[(name, caller.f_code.co_filename.split("src/")[-1], caller.f_lineno)]
        site[0] += dt
        site[1] += 1
        site[2] = tuple(out.shape)
        return out
    return call


for name in ("cat", "rand", "stack", "cross", "where"):
    setattr(torch, name, timed(name, getattr(torch, name)))
torch.linalg.cross = timed("linalg.cross", torch.linalg.cross)
torch.linalg.vector_norm = timed("linalg.vector_norm", torch.linalg.vector_norm)
t0 = time.perf_counter()
for _ in range(5):
    env.step(act)
print(f"env step {(time.perf_counter() - t0) / 5 * 1e3:.1f} ms (with the timing wrappers)")
for (name, where, line), (t, count, shape) in sorted(sites.items(), key=lambda kv: -kv[1][0])[:15]:
    print(f"{t / 5 * 1e3:7.3f} ms/step {count / 5:4.1f} calls/step  {name:20s} {where}:{line} -> {shape}")
