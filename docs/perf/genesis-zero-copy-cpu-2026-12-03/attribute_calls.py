"""Attribute every Python/C call of the env step to the innermost adapter method or Genesis API on the stack.

    PYGLET_HEADLESS=1 .venv/bin/python /tmp/genprof/attribute_calls.py [--out FILE]
"""
import argparse, json, sys, time
from collections import defaultdict
import torch
from unilab.registry import make_manager_based_rl_env

BUCKETS = {
    # adapter methods (unisim/adapters/genesis.py and the SimBackend wrapper)
    ("genesis.py", "_step"): "adapter._step (own)",
    ("genesis.py", "_refresh"): "adapter._refresh (views)",
    ("genesis.py", "_refresh_contacts"): "adapter._refresh_contacts",
    ("genesis.py", "_contact_list"): "adapter._refresh_contacts",
    ("genesis.py", "_set_state_where"): "adapter._set_state_where (own)",
    ("genesis.py", "_write_state"): "adapter._write_state (own)",
    ("contract.py", "step"): "SimBackend.step wrapper",
    ("contract.py", "set_state_where"): "SimBackend.set_state_where wrapper",
    ("link_sensors.py", "compute"): "link_sensors.compute",
    # Genesis API
    ("scene.py", "step"): "gs: scene.step",
    ("rigid_entity.py", "control_dofs_position"): "gs: control_dofs_position",
    ("rigid_entity.py", "set_dofs_velocity"): "gs: set_dofs_velocity",
    ("rigid_entity.py", "set_qpos"): "gs: set_qpos",
    ("rigid_entity.py", "get_qpos"): "gs: getters",
    ("rigid_entity.py", "get_dofs_velocity"): "gs: getters",
    ("rigid_entity.py", "get_links_pos"): "gs: getters",
    ("rigid_entity.py", "get_links_quat"): "gs: getters",
    ("rigid_entity.py", "get_links_vel"): "gs: getters",
    ("rigid_entity.py", "get_links_ang"): "gs: getters",
    ("rigid_entity.py", "get_links_net_contact_force"): "gs: getters",
    ("collider.py", "get_contacts"): "gs: get_contacts",
}


def main():
    p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--steps", type=int, default=20)
    args = p.parse_args()
    torch.set_num_threads(1)
    env = make_manager_based_rl_env("g1_walk_flat", backend="genesis", num_envs=64, device="cpu", seed=0,
                                    overrides=["validate_actions=false"], backend_options={})
    zeros = torch.zeros(env.num_envs, env.action_dim)
    for _ in range(10):
        env.step(zeros)
    counts = defaultdict(int)
    stack = ["env (managers etc.)"]
    frames = []
    codes = {}

    def bucket_of(code):
        b = codes.get(code)
        if b is None:
            b = BUCKETS.get((code.co_filename.rsplit("/", 1)[-1], code.co_name), "")
            if b and code.co_filename.rsplit("/", 1)[-1] == "genesis.py" and "unisim/adapters" not in code.co_filename:
                b = ""
            if b and code.co_filename.rsplit("/", 1)[-1] == "contract.py" and "unisim" not in code.co_filename:
                b = ""
            if b.startswith("gs:") and "site-packages/genesis" not in code.co_filename:
                b = ""
            codes[code] = b
        return b

    def prof(frame, event, arg):
        if event == "call":
            counts[stack[-1]] += 1
            b = bucket_of(frame.f_code)
            if b:
                stack.append(b); frames.append(frame)
        elif event == "c_call":
            counts[stack[-1]] += 1
        elif event == "return":
            if frames and frames[-1] is frame:
                frames.pop(); stack.pop()

    sys.setprofile(prof)
    for _ in range(args.steps):
        env.step(zeros)
    sys.setprofile(None)
    per = {k: v / args.steps for k, v in sorted(counts.items(), key=lambda kv: -kv[1])}
    total = sum(per.values())
    for k, v in per.items():
        print(f"{v:8.1f}  {k}")
    print(f"{total:8.1f}  TOTAL (innermost attribution; python + C calls, as cProfile counts them)")
    if args.out:
        json.dump({"per_env_step": per, "total": total}, open(args.out, "w"), indent=1)
    env.close()


main()
