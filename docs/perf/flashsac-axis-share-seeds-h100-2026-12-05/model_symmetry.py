"""How left-right symmetric the pinned G1 model is: each left_/right_ body pair's mass, inertia,
centre of mass and position (the right one reflected through the x-z plane), each joint pair's
armature, damping, friction loss and range, each actuator pair's gains, bias, gear and force
range, the centre-line bodies' offsets from the mid-plane,
and the whole robot's centre of mass at the default pose. Run from the repo with the venv."""

import mujoco
import numpy as np
from unilab.assets import g1_scene_path

model = mujoco.MjModel.from_xml_path(str(g1_scene_path()))
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
reflect = np.array([1.0, -1.0, 1.0])


def counterpart(name: str) -> str:
    return name.replace("left_", "@").replace("right_", "left_").replace("@", "right_")


bodies = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(model.nbody)]
for i, name in enumerate(bodies):
    j = bodies.index(counterpart(name))
    if i == j:
        if abs(model.body_ipos[i, 1]) > 1e-6:
            print(f"centre-line body {name}: centre of mass {1e3 * model.body_ipos[i, 1]:+.3f} mm off the "
                  f"mid-plane, {model.body_mass[i]:.3f} kg")
    elif "left_" in name:
        mass = model.body_mass[i] - model.body_mass[j]
        com = np.abs(model.body_ipos[i] - reflect * model.body_ipos[j]).max()
        pos = np.abs(model.body_pos[i] - reflect * model.body_pos[j]).max()
        inertia = np.abs(model.body_inertia[i] - model.body_inertia[j]).max()
        if max(abs(mass), com, pos, inertia) > 1e-9:
            print(f"{name} vs right: mass {mass:+.2e} kg, com {com:.1e} m, pos {pos:.1e} m, "
                  f"principal inertia {inertia:.1e} kg m^2")
joints = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(model.njnt)]
for i, name in enumerate(joints):
    if name and "left_" in name:
        j = joints.index(counterpart(name))
        a, b = model.jnt_dofadr[i], model.jnt_dofadr[j]
        same = all(np.isclose(f[a], f[b]) for f in (model.dof_armature, model.dof_damping, model.dof_frictionloss))
        mirrored_range = np.allclose(model.jnt_range[i], model.jnt_range[j]) or np.allclose(
            model.jnt_range[i], -model.jnt_range[j][::-1])
        if not (same and mirrored_range):
            print(f"joint {name}: its dynamics or range differ from its counterpart's")
actuators = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, i) for i in range(model.nu)]
for i, name in enumerate(actuators):
    if "left_" in name:
        j = actuators.index(counterpart(name))
        fields = (model.actuator_gainprm, model.actuator_biasprm, model.actuator_gear, model.actuator_forcerange)
        if not all(np.allclose(f[i], f[j]) for f in fields):
            print(f"actuator {name}: its gains, bias, gear or force range differ from its counterpart's")
print(f"robot centre of mass at the default pose: y = {1e3 * data.subtree_com[1, 1]:+.3f} mm "
      f"({model.body_mass.sum():.2f} kg in all)")
