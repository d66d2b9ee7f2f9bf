"""Torch's CPU profile of ten env steps (zero policy, 1024 envs, mujoco, torch on 1 thread).

    python torch-profile.py g1_motion_tracking > torch-profile-track.txt
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile
from unilab.registry import make_manager_based_rl_env

torch.set_num_threads(1)
env = make_manager_based_rl_env(sys.argv[1], backend="mujoco", num_envs=1024, device="cpu", seed=0,
                                overrides=["validate_actions=false"])
env.reset()
zeros = torch.zeros(env.num_envs, env.action_dim)
for _ in range(10):
    env.step(zeros)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for _ in range(10):
        env.step(zeros)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=25))
