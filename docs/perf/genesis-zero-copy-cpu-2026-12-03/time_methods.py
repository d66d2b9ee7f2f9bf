"""Host ms of each adapter piece, unprofiled, in the env's own backend (64 envs, g1_walk_flat).
Each rep: one env step (untimed), then each piece timed once; medians over reps."""
import json, statistics, sys, time
import torch
from unilab.registry import make_manager_based_rl_env

torch.set_num_threads(1)
env = make_manager_based_rl_env("g1_walk_flat", backend="genesis", num_envs=64, device="cpu", seed=0,
                                overrides=["validate_actions=false"], backend_options={})
b = env.backend
zeros = torch.zeros(env.num_envs, env.action_dim)
for _ in range(10):
    env.step(zeros)
robot, scene = b._robot, b._scene
mask = torch.zeros(env.num_envs, dtype=torch.bool); mask[::16] = True
ctrl = env.action_manager.ctrl.clone()
t = {k: [] for k in ["env_step", "scene_step_x4", "control_dofs_position", "refresh", "refresh_contacts",
                     "set_state_where", "backend_step"]}
def clock(name, fn):
    t0 = time.perf_counter(); fn(); t[name].append(1e3 * (time.perf_counter() - t0))
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
for k in range(reps):
    clock("env_step", lambda: env.step(zeros))
    v = b.views(); qpos, qvel = v.qpos.clone(), v.qvel.clone()
    target = torch.clamp(ctrl, b._ctrl_lo, b._ctrl_hi)
    clock("control_dofs_position", lambda: robot.control_dofs_position(target, b._ctrl_dofs))
    clock("scene_step_x4", lambda: [scene.step(update_visualizer=False, refresh_visualizer=False) for _ in range(4)])
    clock("refresh", b._refresh)
    clock("refresh_contacts", b._refresh_contacts)
    clock("set_state_where", lambda: b.set_state_where(mask, qpos, qvel))
    clock("backend_step", lambda: b.step(ctrl, 4))
    b.set_state(torch.arange(env.num_envs), qpos, qvel); env.robot.invalidate()
res = {k: statistics.median(v) for k, v in t.items()}
for k, v in res.items():
    print(f"{k:24s} median {v:8.3f} ms  min {min(t[k]):8.3f}")
if len(sys.argv) > 2:
    json.dump(res, open(sys.argv[2], "w"), indent=1)
env.close()
