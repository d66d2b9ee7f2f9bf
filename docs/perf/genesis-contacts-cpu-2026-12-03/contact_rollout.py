import sys, torch, time
from unilab.registry import make_manager_based_rl_env
env = make_manager_based_rl_env("g1_walk_flat", backend="genesis", num_envs=32, device="cpu", seed=0)
env.reset(); b = env.backend
gen = torch.Generator().manual_seed(0)
forces, flags, qpos = [], [], []
for step in range(120):
    env.step(0.8 * torch.randn(env.num_envs, 29, generator=gen))
    forces.append(b._contact_force.clone()); flags.append(b._in_contact.clone()); qpos.append(b._views.qpos.clone())
t0 = time.perf_counter()
for _ in range(100): b._refresh_contacts()
print("refresh ms", 1e3 * (time.perf_counter() - t0) / 100)
torch.save({"f": torch.stack(forces), "c": torch.stack(flags), "q": torch.stack(qpos)}, sys.argv[1])
