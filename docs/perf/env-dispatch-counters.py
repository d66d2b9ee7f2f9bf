"""Kernel-sized ops and Python calls per env step (g1_walk_flat, zero actions)."""
import cProfile, json, pstats, sys, torch
torch.set_num_threads(1)
import unilab
from unisim.host_sync import HostSyncProbe
backend, n = sys.argv[1], int(sys.argv[2])
out = {}
for task in sys.argv[3].split(","):
    env = unilab.make_manager_based_rl_env(task, backend=backend, num_envs=n, seed=0, overrides=["validate_actions=false"])
    z = torch.zeros(n, env.action_dim)
    for _ in range(3): env.step(z)
    ignore = ("step", "set_state_where") if backend == "mujoco" else ()
    with HostSyncProbe() as p, p.ignoring(env.backend, *ignore):
        for _ in range(20): env.step(z)
    prof = cProfile.Profile(); prof.enable()
    for _ in range(20): env.step(z)
    prof.disable()
    out[task] = {"kernel_ops_per_step": p.kernel_op_count / 20, "aten_ops_per_step": p.op_count / 20,
                 "host_syncs_per_step": len(p.syncs) / 20, "python_calls_per_step": pstats.Stats(prof).total_calls / 20}
    env.close()
print(json.dumps(out))
