"""g1_walk_rough: the G1 velocity task on a generated terrain, with a height scan.

The walking MDP of g1_walk_flat (commands, fused rewards, foot contact from the simulator,
pushes, mirrors) on a 10 x 10 grid of sub-terrains (``ROUGH_TERRAIN``: flat, random rough,
pyramid slopes up and down, pyramid stairs up and down, random boxes; rows are difficulty
levels), as in mjlab's Velocity-Rough-G1 and Isaac Lab's rough locomotion tasks. Changes from
flat:

- a height scan of 17 x 11 rays (1.6 x 1.0 m every 0.1 m) around the pelvis, heading-aligned,
  cast from 20 m up onto the terrain group: the critic's observation, and the policy's with
  +-0.1 m noise, both clipped to +-1 m;
- envs start on their sub-terrain's origin (+-0.5 m) and move between difficulty levels by the
  terrain curriculum (``unilab.terrains.terms.terrain_levels``) when their episodes end, starting
  on levels 0-5; the command ranges stay fixed (no widening stage);
- no base-height termination: on a terrain the base's world height says nothing of a fall.

It needs a backend that declares HEIGHT_SCAN and CONTACT_SENSORS (mujoco, mjwarp); genesis
refuses it when the backend is built. The evaluation sweeps fixed commands on each terrain type
at fixed difficulties (``ROUGH_SWEEP``, ``EVAL_DIFFICULTIES``), on the play variant's terrain.
"""

from __future__ import annotations

from unilab.config import CurriculumTermCfg, EnvCfg, EventTermCfg, HeightScanCfg, MetricTermCfg, MirrorCfg, ObsTermCfg
from unilab.evaluation import register_evaluation
from unilab.registry import register_task
from unilab.tasks.velocity.config.g1.flat import COMMAND, g1_walk_flat
from unilab.tasks.velocity.evaluation import TerrainVelocitySweep, TerrainVelocitySweepCfg
from unilab.terms import mirrors as mir
from unilab.terms import observations as obs
from unilab.terrains import TERRAIN_GEOM_GROUP, SubTerrainCfg, TerrainCfg
from unilab.terrains import sub_terrains as st
from unilab.terrains import terms as terrain

SCAN = "terrain"
# The command ranges the rough task trains (and its sweep stays inside).
TRAINING_RANGE = ((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))


def rough_terrain() -> TerrainCfg:
    """Isaac Lab's rough mix, heights scaled for the 1.3 m G1 (its humanoid configs lower the
    rough noise and box heights), stairs weighted up: columns flat 1, rough 1, slope up 2, slope
    down 1, stairs up 2, stairs down 2, boxes 1. Ten columns rather than Isaac Lab's 20 keep the box
    count near 3,000: every ray tests every terrain geom (mujoco_warp's plain ray path), and the
    broadphase pays for them too."""
    return TerrainCfg(seed=0, size=(8.0, 8.0), num_rows=10, num_cols=10, difficulty_range=(0.0, 1.0),
                      resolution=0.1, border_width=5.0, max_init_level=5, sub_terrains={
        "flat": SubTerrainCfg(func=st.flat, proportion=0.1),
        "random_rough": SubTerrainCfg(func=st.random_uniform, proportion=0.1,
                                      params={"noise_range": (0.01, 0.06), "noise_step": 0.01}),
        "slope_up": SubTerrainCfg(func=st.pyramid_slope, proportion=0.15,
                                  params={"slope_range": (0.0, 0.4), "platform_width": 2.0}),
        "slope_down": SubTerrainCfg(func=st.pyramid_slope, proportion=0.15,
                                    params={"slope_range": (0.0, 0.4), "platform_width": 2.0, "inverted": True}),
        "stairs_up": SubTerrainCfg(func=st.pyramid_stairs, proportion=0.2,
                                   params={"step_height_range": (0.05, 0.2), "step_width": 0.3,
                                           "platform_width": 3.0, "border_width": 1.0}),
        "stairs_down": SubTerrainCfg(func=st.pyramid_stairs, proportion=0.2,
                                     params={"step_height_range": (0.05, 0.2), "step_width": 0.3,
                                             "platform_width": 3.0, "border_width": 1.0, "inverted": True}),
        "boxes": SubTerrainCfg(func=st.random_boxes, proportion=0.1,
                               params={"height_range": (0.025, 0.1), "grid_width": 0.5, "platform_width": 2.0}),
    })


def _scan_term(noisy: bool) -> ObsTermCfg:
    return ObsTermCfg(func=obs.height_scan, params={"scan": SCAN, "offset": 0.5},
                      noise=(-0.1, 0.1) if noisy else None, clip=(-1.0, 1.0),
                      mirror=MirrorCfg(func=mir.height_scan_grid, params={"scan": SCAN}))


def g1_walk_rough() -> EnvCfg:
    cfg = g1_walk_flat()
    cfg.terrain = rough_terrain()
    cfg.height_scans = {SCAN: HeightScanCfg(body="pelvis", size=(1.6, 1.0), resolution=0.1, offset=(0.0, 0.0, 20.0),
                                            max_distance=30.0, geom_groups=(TERRAIN_GEOM_GROUP,))}
    cfg.observations["policy"].terms["height_scan"] = _scan_term(noisy=True)
    cfg.observations["critic"].terms["height_scan"] = _scan_term(noisy=False)
    cfg.terminations.pop("base_too_low")
    # First: the later events edit the start it places (heading, joints).
    cfg.events = {"reset_on_terrain": EventTermCfg(func=terrain.reset_root_on_terrain, mode="reset",
                                                   params={"xy_range": (-0.5, 0.5)}), **cfg.events}
    cfg.curriculum = {"terrain_levels": CurriculumTermCfg(func=terrain.terrain_levels,
                                                          params={"command_name": COMMAND})}
    cfg.metrics["terrain_level"] = MetricTermCfg(func=terrain.terrain_level)
    return cfg


# The evaluation's fixed difficulties: the play terrain's rows (difficulty_range spaced evenly).
EVAL_DIFFICULTIES = (0.2, 0.5, 0.8)


def g1_walk_rough_play() -> EnvCfg:
    """Evaluation: no observation noise, no pushes, no curriculum, long episodes, and a terrain of
    one column per type and one row per evaluated difficulty, its sub-terrains 12 m across so a
    sweep's envs walk on the terrain they are measured on."""
    cfg = g1_walk_rough()
    cfg.observations["policy"].enable_corruption = False
    cfg.events.pop("push")
    cfg.events["reset_on_terrain"].params["xy_range"] = (0.0, 0.0)
    cfg.curriculum = {}
    cfg.episode_length_s = 1e6
    types = len(cfg.terrain.sub_terrains)
    cfg.terrain = cfg.terrain.model_copy(update={
        "size": (12.0, 12.0), "num_rows": len(EVAL_DIFFICULTIES), "num_cols": types, "max_init_level": 0,
        "difficulty_range": (EVAL_DIFFICULTIES[0], EVAL_DIFFICULTIES[-1])})
    return cfg


ROUGH_SWEEP = [
    (0.5, 0.0, 0.0), (1.0, 0.0, 0.0), (-0.5, 0.0, 0.0),   # forward, backward
    (0.0, 0.3, 0.0), (0.0, -0.3, 0.0),                    # lateral
    (0.0, 0.0, 0.5), (0.0, 0.0, -0.5),                    # turning in place
    (0.5, 0.0, 0.5), (0.0, 0.0, 0.0),                     # a combination, standing
]


def g1_walk_rough_sweep() -> TerrainVelocitySweep:
    return TerrainVelocitySweep(TerrainVelocitySweepCfg(
        task="g1_walk_rough_play", command_name=COMMAND, commands=ROUGH_SWEEP, training_range=TRAINING_RANGE,
        terrains=list(rough_terrain().sub_terrains), difficulties=list(EVAL_DIFFICULTIES),
        seconds=6.0, settle_s=1.5))


register_task("g1_walk_rough", g1_walk_rough)
register_task("g1_walk_rough_play", g1_walk_rough_play)
register_evaluation(["g1_walk_rough", "g1_walk_rough_play"], g1_walk_rough_sweep)
