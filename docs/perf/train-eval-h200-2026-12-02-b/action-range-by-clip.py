"""How far the walking task's actions must reach to pose the legs as people walk and jog.

For each pinned walk/jog/turn clip: its mean forward speed in the body frame, and the |action|
that g1_walk_flat's action mapping (PD target = default pose + action_scale * a * scale per
joint) needs to reach the clip's leg joint angles (hip pitch and roll, knee, ankle pitch).
With action_scale=1 both learners squash actions into [-1, 1]. Run: python action-range-by-clip.py
"""
import torch
from unilab import make_manager_based_rl_env
from unilab import math as lm

track = make_manager_based_rl_env("g1_motion_tracking_walk_run", backend="mujoco", num_envs=1)
walk = make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=1)
table, actions, names = track.command_manager.term("motion").library, walk.action_manager, walk.robot.joint_names
assert names == track.robot.joint_names
legs = [i for i, n in enumerate(names) if any(k in n for k in ("hip_pitch", "hip_roll", "knee", "ankle_pitch"))]
print(f"{'clip':40s} {'vx m/s':>7s} {'|a| p95':>8s} {'|a| max':>8s}  joint of the max")
for c in range(table.num_clips):
    rows = table.packed[int(table.start[c]):int(table.start[c]) + int(table.length[c])]
    vx = lm.quat_apply_inverse(rows[:, table.columns["root_quat"]], rows[:, table.columns["root_lin_vel"]])[:, 0]
    need = ((rows[:, table.columns["joint_pos"]] - actions.offset) / actions.scale).abs()[:, legs]
    peak = need.max(dim=0).values
    print(f"{table.names[c][:40]:40s} {float(vx.mean()):+7.2f} {float(need.flatten().quantile(0.95)):8.2f} "
          f"{float(peak.max()):8.2f}  {names[legs[int(peak.argmax())]]}")
for i, n in enumerate(names):
    if n.startswith("left_") and i in legs:
        lo, hi = (actions.offset[i] - actions.scale[i]).item(), (actions.offset[i] + actions.scale[i]).item()
        print(f"{n:26s} PD target range at action_scale 1: [{lo:+.2f}, {hi:+.2f}] rad")
walk.close()
track.close()
