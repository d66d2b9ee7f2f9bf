"""g1_walk_flat: Unitree G1 (29 DoF) velocity tracking on flat ground.

50 Hz control (sim dt 0.005 from the scene, decimation 4), 20 s episodes. The reward
set follows mjlab 1.6's G1 velocity task (exp-kernel tracking with std^2 0.25 / 0.5,
torso upright, speed-dependent posture, action rate, soft joint limits, foot slip)
plus an alive bonus, a terminal penalty and Isaac Lab's biped air-time term, since on
flat ground with an off-policy learner a gait incentive shortens the shuffling phase.
Foot contact is read from the simulator (the ``feet`` contact sensor: the feet against the
floor), so the env needs a backend that declares contact sensing; ``g1_walk_flat_height_proxy``
is the named fallback for one that does not. Variants are plain functions editing the default
config.
"""

from __future__ import annotations

import math

from unilab.assets import g1_scene_path
from unilab.assets.g1_scene import g1_action_scale
from unilab.config import (
    ActionCfg,
    ContactSensorCfg,
    CurriculumTermCfg,
    EnvCfg,
    EventTermCfg,
    MirrorCfg,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    SensorCfg,
    TerminationTermCfg,
)
from unilab.evaluation import register_evaluation
from unilab.registry import register_task
from unilab.tasks.velocity.config.g1.constants import CONTACT_HEIGHT, FEET, POSTURE, RESET_KEYFRAME, TORSO
from unilab.tasks.velocity.evaluation import VelocitySweep, VelocitySweepCfg
from unilab.tasks.velocity.mdp import curriculum as vel_cur
from unilab.tasks.velocity.mdp import observations as vel_obs
from unilab.tasks.velocity.mdp import rewards as vel_rew
from unilab.tasks.velocity.mdp.commands import UniformVelocityCommandCfg
from unilab.tasks.velocity.mdp.sensors import FeetContact, FeetContactForce
from unilab.terms import events as ev
from unilab.terms import mirrors as mir
from unilab.terms import observations as obs
from unilab.terms import rewards as rew
from unilab.terms import terminations as term

COMMAND = "twist"
# The command ranges of the curriculum's final stage: what the policy is trained to follow.
TRAINING_RANGE = ((-1.5, 2.0), (-0.5, 0.5), (-1.0, 1.0))
# Vectorized env steps (common_step_counter) before the curriculum's last stage. mjlab widens at
# 120k steps of a PPO schedule; an off-policy run of a few minutes makes ~10-30k, and a stage it
# never reaches leaves the fast commands of the training range untrained.
WIDEN_STEP = 3_000
WEIGHTS = {"track_lin_vel": 2.0, "track_ang_vel": 2.0, "upright": 1.0, "posture": 1.0, "body_ang_vel": -0.05,
           "action_rate": -0.1, "joint_limits": -1.0, "feet_air_time": 0.5, "foot_slip": -0.1, "alive": 0.5,
           "terminated": -100.0}


# The left-right reflection of each observation and of the actions (unilab.mirror), for a
# learner's symmetry augmentation. The G1's joints mirror by name; roll and yaw change sign.
JOINTS = MirrorCfg(func=mir.left_right_joints)
LINEAR = MirrorCfg(func=mir.signs, params={"signs": (1.0, -1.0, 1.0)})  # also gravity in the base frame
ANGULAR = MirrorCfg(func=mir.signs, params={"signs": (-1.0, 1.0, -1.0)})
TWIST = MirrorCfg(func=mir.signs, params={"signs": (1.0, -1.0, -1.0)})  # (vx, vy, yaw rate)
SAME = MirrorCfg(func=mir.identity)
LEFT_RIGHT = MirrorCfg(func=mir.swapped_pairs)  # per-foot columns, left then right


def _policy_terms(noisy: bool) -> dict[str, ObsTermCfg]:
    n = (lambda lo, hi: (lo, hi)) if noisy else (lambda lo, hi: None)
    return {
        "base_ang_vel": ObsTermCfg(func=obs.base_ang_vel, noise=n(-0.2, 0.2), mirror=ANGULAR),
        "projected_gravity": ObsTermCfg(func=obs.projected_gravity, noise=n(-0.05, 0.05), mirror=LINEAR),
        "command": ObsTermCfg(func=obs.generated_commands, params={"command_name": COMMAND}, mirror=TWIST),
        "joint_pos": ObsTermCfg(func=obs.joint_pos_rel, noise=n(-0.01, 0.01), mirror=JOINTS),
        "joint_vel": ObsTermCfg(func=obs.joint_vel, noise=n(-1.5, 1.5), mirror=JOINTS),
        "actions": ObsTermCfg(func=obs.last_action, mirror=JOINTS),
    }


def _fused_rewards() -> dict[str, RewardTermCfg]:
    return {"velocity": RewardTermCfg(func=vel_rew.velocity_rewards, weights=dict(WEIGHTS), params={
        "command_name": COMMAND, "std_lin_vel": math.sqrt(0.25), "std_ang_vel": math.sqrt(0.5),
        "lin_vel_z_weight": vel_rew.LIN_VEL_Z_WEIGHT, "ang_vel_xy_weight": vel_rew.ANG_VEL_XY_WEIGHT,
        "std_upright": math.sqrt(0.2), "torso_body": TORSO, "posture": POSTURE, "soft_factor": 0.9,
        "sensor_name": "feet", "air_time_threshold": 0.4, "command_threshold": 0.1})}


def _unfused_rewards() -> dict[str, RewardTermCfg]:
    w = WEIGHTS
    feet = {"sensor_name": "feet", "command_name": COMMAND, "command_threshold": 0.1}
    return {
        "track_lin_vel": RewardTermCfg(func=vel_rew.track_lin_vel, weight=w["track_lin_vel"],
                                       params={"std": math.sqrt(0.25), "command_name": COMMAND,
                                               "z_weight": vel_rew.LIN_VEL_Z_WEIGHT}),
        "track_ang_vel": RewardTermCfg(func=vel_rew.track_ang_vel, weight=w["track_ang_vel"],
                                       params={"std": math.sqrt(0.5), "command_name": COMMAND,
                                               "xy_weight": vel_rew.ANG_VEL_XY_WEIGHT}),
        "upright": RewardTermCfg(func=rew.upright, weight=w["upright"], params={"std": math.sqrt(0.2), "body": TORSO}),
        "posture": RewardTermCfg(func=vel_rew.posture, weight=w["posture"],
                                 params={"command_name": COMMAND, **POSTURE}),
        "body_ang_vel": RewardTermCfg(func=rew.body_ang_vel_xy, weight=w["body_ang_vel"], params={"body": TORSO}),
        "action_rate": RewardTermCfg(func=rew.action_rate_l2, weight=w["action_rate"]),
        "joint_limits": RewardTermCfg(func=rew.joint_pos_limits, weight=w["joint_limits"], params={"soft_factor": 0.9}),
        "feet_air_time": RewardTermCfg(func=vel_rew.feet_air_time, weight=w["feet_air_time"],
                                       params={**feet, "threshold": 0.4}),
        "foot_slip": RewardTermCfg(func=vel_rew.foot_slip, weight=w["foot_slip"], params=feet),
        "alive": RewardTermCfg(func=rew.alive, weight=w["alive"]),
        "terminated": RewardTermCfg(func=rew.is_terminated, weight=w["terminated"]),
    }


def g1_walk_flat() -> EnvCfg:
    return EnvCfg(
        scene=g1_scene_path,
        decimation=4,
        episode_length_s=20.0,
        reset_keyframe=RESET_KEYFRAME,
        actions=ActionCfg(scale=g1_action_scale(), use_default_offset=True, mirror=JOINTS),
        contact_sensors={"feet": ContactSensorCfg(bodies=FEET, with_bodies=("world",), force_threshold=1.0)},
        sensors={"feet": SensorCfg(func=FeetContactForce, params={"contact_sensor": "feet", "bodies": FEET})},
        commands={COMMAND: UniformVelocityCommandCfg(lin_vel_x=(-1.0, 1.0), lin_vel_y=(-0.5, 0.5),
                                                     ang_vel_z=(-1.0, 1.0), resampling_time_range_s=(3.0, 8.0),
                                                     standing_fraction=0.1, heading_command=False)},
        observations={
            "policy": ObsGroupCfg(terms=_policy_terms(noisy=True), enable_corruption=True),
            "critic": ObsGroupCfg(terms={
                **_policy_terms(noisy=False),
                "base_lin_vel": ObsTermCfg(func=obs.base_lin_vel, mirror=LINEAR),
                "base_height": ObsTermCfg(func=obs.base_height, mirror=SAME),
                "feet_height": ObsTermCfg(func=obs.body_height, params={"bodies": FEET}, mirror=LEFT_RIGHT),
                "feet_contact": ObsTermCfg(func=vel_obs.feet_contact, params={"sensor_name": "feet"},
                                           mirror=LEFT_RIGHT),
            }, enable_corruption=False),
        },
        rewards=_fused_rewards(),
        terminations={
            "time_out": TerminationTermCfg(func=term.time_out, time_out=True),
            "fell_over": TerminationTermCfg(func=term.bad_orientation, params={"limit_angle": math.radians(70.0)}),
            "base_too_low": TerminationTermCfg(func=term.base_height_below, params={"min_height": 0.35}),
        },
        events={
            "reset_yaw": EventTermCfg(func=ev.reset_root_yaw, mode="reset", params={"yaw_range": (-math.pi, math.pi)}),
            "reset_joints": EventTermCfg(func=ev.reset_joints_offset, mode="reset",
                                         params={"position_range": (-0.1, 0.1)}),
            "push": EventTermCfg(func=ev.push_by_velocity, mode="interval", interval_range_s=(5.0, 10.0),
                                 params={"velocity_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5)}}),
        },
        # The forward range widens to the training range after WIDEN_STEP vectorized env steps
        # (12.3M env steps at 4096 envs), which FastSAC's GPU preset reaches about 60 s into training
        # at ~210k env-steps/s: a 90-s run trains the fastest commands for its last ~30 s.
        curriculum={"command_ranges": CurriculumTermCfg(func=vel_cur.command_range_stages, params={
            "command_name": COMMAND,
            "stages": [{"step": 0, "lin_vel_x": (-1.0, 1.0), "ang_vel_z": (-1.0, 1.0)},
                       {"step": WIDEN_STEP, "lin_vel_x": TRAINING_RANGE[0]}]})},
    )


def g1_walk_flat_unfused() -> EnvCfg:
    """Same task with one term per reward component (reference for the fused term)."""
    cfg = g1_walk_flat()
    cfg.rewards = _unfused_rewards()
    return cfg


def g1_walk_flat_dr() -> EnvCfg:
    """Adds friction and torso-mass randomization at startup (needs model-field writes)."""
    cfg = g1_walk_flat()
    cfg.events["friction"] = EventTermCfg(func=ev.randomize_friction, mode="startup", params={"range": (0.5, 1.25)})
    cfg.events["torso_mass"] = EventTermCfg(func=ev.randomize_body_mass, mode="startup",
                                            params={"bodies": [TORSO], "range": (0.9, 1.1)})
    return cfg


SWEEP = [
    (0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (1.5, 0.0, 0.0), (2.0, 0.0, 0.0),   # forward
    (-0.5, 0.0, 0.0), (-1.0, 0.0, 0.0), (-1.5, 0.0, 0.0),                 # backward
    (0.0, 0.5, 0.0), (0.0, -0.5, 0.0),                                    # lateral
    (0.0, 0.0, 0.5), (0.0, 0.0, 1.0), (0.0, 0.0, -1.0),                   # turning in place
    (1.0, 0.0, 0.5), (1.0, 0.0, -1.0), (0.5, 0.3, 0.0), (-0.5, -0.3, 0.5),  # combinations
    (0.0, 0.0, 0.0),                                                      # standing
]


def g1_walk_flat_sweep() -> VelocitySweep:
    return VelocitySweep(VelocitySweepCfg(task="g1_walk_flat_play", command_name=COMMAND, commands=SWEEP,
                                          training_range=TRAINING_RANGE))


def g1_walk_flat_height_proxy() -> EnvCfg:
    """The fallback for a backend without contact sensing: a foot is in contact when its
    ankle-roll body origin is below CONTACT_HEIGHT (exact enough on flat ground only)."""
    cfg = g1_walk_flat()
    cfg.contact_sensors.pop("feet")
    cfg.sensors["feet"] = SensorCfg(func=FeetContact, params={"bodies": FEET, "contact_height": CONTACT_HEIGHT})
    return cfg


def g1_walk_flat_play() -> EnvCfg:
    """Evaluation: no observation noise, no pushes, no curriculum, long episodes."""
    cfg = g1_walk_flat()
    cfg.observations["policy"].enable_corruption = False
    cfg.events.pop("push")
    cfg.curriculum = {}
    cfg.episode_length_s = 1e6
    return cfg


register_task("g1_walk_flat", g1_walk_flat)
register_task("g1_walk_flat_unfused", g1_walk_flat_unfused)
register_task("g1_walk_flat_dr", g1_walk_flat_dr)
register_task("g1_walk_flat_height_proxy", g1_walk_flat_height_proxy)
register_task("g1_walk_flat_play", g1_walk_flat_play)
register_evaluation(["g1_walk_flat", "g1_walk_flat_unfused", "g1_walk_flat_dr", "g1_walk_flat_height_proxy",
                     "g1_walk_flat_play"],
                    g1_walk_flat_sweep)
