"""docs/tasks.md's example owner, with its play variant and its evaluation: trained, played,
evaluated and exported as ``--task user_tasks_pkg.tasks:g1_walk_flat_no_gait``."""

from __future__ import annotations

from unilab.config import EnvCfg, RewardTermCfg
from unilab.evaluation import register_evaluation
from unilab.tasks.velocity.config.g1.flat import g1_walk_flat, g1_walk_flat_play, g1_walk_flat_sweep
from unilab.terms import rewards as rew

from unilab import register_task


def g1_walk_flat_no_gait() -> EnvCfg:
    cfg = g1_walk_flat()                                   # start from an owner, edit plainly
    cfg.rewards["velocity"].weights["feet_air_time"] = 0.0
    cfg.rewards["stand_still"] = RewardTermCfg(func=rew.action_rate_l2, weight=-0.05)
    return cfg


def g1_walk_flat_no_gait_play() -> EnvCfg:
    cfg = g1_walk_flat_play()
    cfg.rewards["velocity"].weights["feet_air_time"] = 0.0
    cfg.rewards["stand_still"] = RewardTermCfg(func=rew.action_rate_l2, weight=-0.05)
    return cfg


def g1_walk_flat_no_gait_sweep():
    """The flat sweep, run on this package's play variant."""
    return g1_walk_flat_sweep().with_options({"task": "g1_walk_flat_no_gait_play"})


register_task("g1_walk_flat_no_gait", g1_walk_flat_no_gait)
register_task("g1_walk_flat_no_gait_play", g1_walk_flat_no_gait_play)
register_evaluation(["g1_walk_flat_no_gait", "g1_walk_flat_no_gait_play"], g1_walk_flat_no_gait_sweep)
