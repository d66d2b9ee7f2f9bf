"""Named training presets: data that ``unilab-train --preset NAME`` starts from.

A preset fixes a task, backend, env count, budget, the algorithm overrides it was tuned
with (per algorithm) and its training goals (see ``unilab_rl.goals``). Flags and
``key=value`` overrides given on the command line win over the preset's.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator


class TrainingPreset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    task: str
    backend: str
    algo: str
    num_envs: int
    minutes: dict[str, float]  # algorithm -> training budget: each learns at its own pace
    overrides: dict[str, tuple[str, ...]]  # algorithm -> key=value tokens
    goals: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_entry_per_algorithm(self) -> TrainingPreset:
        if set(self.minutes) != set(self.overrides):
            raise ValueError(f"minutes are given for {sorted(self.minutes)}, overrides for {sorted(self.overrides)}")
        return self

    def overrides_for(self, algo: str) -> list[str]:
        if algo not in self.overrides:
            raise ValueError(f"preset: no overrides tuned for --algo {algo}; tuned for: {sorted(self.overrides)}")
        return list(self.overrides[algo])

    def minutes_for(self, algo: str) -> float:
        self.overrides_for(algo)  # the same error for an algorithm the preset was not tuned for
        return self.minutes[algo]


# FlashSAC for the G1 at 4096 envs. The paper's benchmark used 1024 envs, batch 2048 and 2
# updates per env step (each transition sampled ~4 times); at 4096 envs a batch of 8192 with 2
# updates keeps that reuse ratio with 4x larger, better-conditioned BatchNorm batches. Walking
# adds a faster target (_FLASHSAC_WALK_PACE); tracking keeps these.
_FLASHSAC_G1 = (
    "batch_size=8192",
    "learning_rate=3e-4",
    "n_step=3",
    "learning_starts=131072",       # 32 vectorized steps before the first update
    "replay_capacity_per_env=2048",  # 8.4M transitions, ~14 GB of fp32 observations
    "actor_width=128", "actor_blocks=2",
    "critic_width=256", "critic_blocks=2",
    "amp=true",
    "compile=true",  # fuses the BatchNorm/elementwise chains: learner 31 -> 9 ms per env step
    # The loss math compiled around the networks too (the same math): on an H200 an update took
    # 0.88x the time (3.65 -> 3.21 ms from its CUDA graph), as FastSAC's losses did before.
    "compile_losses=true",
    "log_every=50",
    "checkpoint_every=1000",
)
# The walking action range. Both learners squash actions into [-action_scale, action_scale],
# while the task's per-joint scales were made for PPO, whose actions are unbounded: at 1 the
# knee's PD target stays within [0.32, 1.02] rad, short of what a stride at 2 m/s or -1.5 m/s
# needs. At 2 both learners reached the ends of the command range (vx 2.0 and -1.5) on an H200.
_WALK_ACTION_SCALE = 2.0
_WALK_ACTION_RANGE = (f"action_scale={_WALK_ACTION_SCALE}",)
# A share of command draws with one nonzero axis, so pure turns in place and the range's ends
# are asked for often enough. FastSAC with it and the wider range passed all 17 sweep commands
# after 210 s; without it, it missed a 0.5 rad/s turn in place or vx 2.0 (one seed each). Two
# more seeds with it still missed that turn late in 30M-env-step runs (16 and 15 of 17).
_WALK_SINGLE_AXIS_COMMANDS = ("commands.twist.single_axis_fraction=0.3",)
# The tracking rewards' off-axis weights at mjlab's later values: vertical velocity 2, roll and
# pitch rates 0.05 (the task's default weighs both 1), so the body's rocking while it steps costs
# a turn in place little of its reward. On an H200, FastSAC with them passed all 17 sweep commands
# after 90 s on each of seeds 0-3, where without them 2 of 7 runs of 90 s on those seeds had (2 of
# 8 on seeds 0-4). One FlashSAC run with them (seed 0, 3 minutes) passed 14, within its range
# without them (14-16), so its entry leaves them out.
_WALK_OFF_AXIS_WEIGHTS = ("rewards.velocity.params.lin_vel_z_weight=2.0",
                          "rewards.velocity.params.ang_vel_xy_weight=0.05")
# Walking: FastSAC's horizon and exploration. With gamma 0.99 and a target std of 0.15 (an
# entropy target of -13.9 nats over 29 joints), FlashSAC learned to stand: on an H200, after 5
# minutes (8 updates per step), it stood still on every forward command of the velocity sweep,
# its temperature down to 1.7e-4. With gamma 0.97 (FastSAC's) and a target std of 0.25 at
# action scale 1 (0.03 nats per joint, about FastSAC's target of 0) it walked. Its entropy
# target grows with log(action_scale) per joint, so each entry divides that std by its scale to
# keep the target (FastSAC's target does not depend on the scale): 0.125 at walking's 2.
#
# Tracking (scale 4, std 0.0625): on an H200 this passed the tracking evaluation of the default
# clip after 9 minutes (100% success, 34.3 mm MPKPE; 44.4 mm at 7 minutes; one seed). With gamma
# 0.99 and the default target std of 0.15 (at scale 4 a far higher entropy target) it was
# 91-102 mm off at 3-4 minutes. On the whole walk/run set (scale 8, std 0.03125), after 9 minutes
# it played 15 of 17 clips through and kept none within 40 mm (118 mm MPKPE; FastSAC: 16, 6 and
# 50.8 mm). One seed.
_FLASHSAC_STD_AT_SCALE_1 = 0.25


def _flashsac_g1(action_scale: float, pace: tuple[str, ...]) -> tuple[str, ...]:
    """FlashSAC's G1 entry at an action range and pace: FastSAC's horizon, the entropy target of std 0.25 at scale 1."""
    return _FLASHSAC_G1 + pace + ("gamma=0.97", f"target_std={_FLASHSAC_STD_AT_SCALE_1 / action_scale}",
                                  f"action_scale={action_scale}")


_FLASHSAC_PACE = ("updates_per_step=2",)
# Walking in 3 minutes: 2 updates per env step, as tracking, with a faster target update (FastSAC's
# is 0.125, FlashSAC's own 0.01; with the default, 2 updates needed 7 minutes). Judged by the
# averaged actor (_AVERAGED_POLICY), on H100s 2 updates passed all 17 sweep commands on 10 of seeds
# 0-11 (16 on the other two; 47.8-49.0M env steps, 277-280k env-steps/s while learning) and kept
# 0.696x of the env alone beside collection, where 3 updates passed all 17 in 6 of 8 runs of seeds
# 0-7 (16 in the other two; 241-243k env-steps/s, 0.597-0.602x of the env alone beside collection).
# On an H200, before later learner changes and judged by the latest actor, 2 updates passed all 17
# on 3 of seeds 0-4 and kept 0.68x beside collection. 4 updates passed all 17 on 3 of seeds 0-6 on
# H100s, judged by the latest actor, at 0.51x. FastSAC's single-axis share
# (_WALK_SINGLE_AXIS_COMMANDS) at 3 updates passed all 17 on 3 of seeds 0-7, two runs of them at 9
# and 5, so this entry leaves it out; so does symmetry augmentation (symmetry_augmentation=true
# batch_size=4096), all 17 on 2 of seeds 0-5 against 4 without.
_FLASHSAC_WALK_PACE = (*_FLASHSAC_PACE, "target_tau=0.05")


# A learner's updates beside collection (overlap_learning): the policy is one update stale, the
# env and the learner share the GPU instead of taking turns.
# FlashSAC walking with it passed 16 of 17 sweep commands at 3 minutes on two seeds (7 of 17
# without) and 14 in two more runs of those seeds, which passed all 17 at 7 minutes (111-112M env
# steps), when its entry without it first passed. Its tracking entries have not been run with it.
_LEARN_BESIDE_COLLECTION = ("overlap_learning=true",)

# FastSAC keeps its own defaults (batch 8192, 8 updates per env step); compiled networks; its
# updates run beside collection: on an H200 that made 1.17x the env steps per second while
# learning, and the 5-minute sweep passed 16 of 17 commands against 15 of 17 for the same run
# learning after each step (one seed each). Halving its updates (4 per env step) made
# 1.3-1.7x the env steps in 90 s but passed 11-13 of 17 on three seeds (with 8: 9-17, six of eight
# runs 15 or more), so it keeps 8. Its losses are compiled too (compile_losses): the learner's
# update alone took 0.73x the time on an H200 and its share of a collector step 0.87-0.89x; with
# the networks' GEMM padding too (networks/mlp.py), beside collection it kept 0.61-0.62x of its
# learning-free collector. Three seeds alone for 90 s with both made 21.1-21.3M env steps
# (14.6-18.5M before) and passed 16 of 17 each.
_FASTSAC_G1 = ("compile=true", "compile_losses=true", *_LEARN_BESIDE_COLLECTION, "log_every=50",
               "checkpoint_every=1000")

# The walking env's step replayed from CUDA graphs (unilab.step_graphs): on an H200 at 4096 envs
# the env alone stepped at 0.958x of raw physics replaying its own writes, against 0.948x eager.
# While FastSAC learns, the learner dominates: 30-s runs made 193-195k env-steps/s either way.
# Evaluation, play and export decide this for themselves (unilab.config.task_overrides).
_GRAPHED_ENV = ("env.cuda_graph=true",)

# A slow average of the actor, kept beside it and judged in its place. Tracking: FastSAC at 2
# minutes on an H200 passed with it at 32.3, 25.3 and 30.9 mm MPKPE (three seeds; the same runs'
# latest actors 35.1, 33.1 and 38.4 mm), where two runs judged by their latest actor were at 40.9
# and 41.7. FlashSAC's walking entry at 3 updates per env step: on H100s, 8 runs of seeds 0-7
# each judged both ways, the average passed all 17 sweep commands in 6 (16 in the other two), the
# same runs' latest actors in 3 (12-17); per run the average passed more commands in 4 and as many
# in 4; at 2 updates, 10 of 12 against 3 of 12. Collection still samples the latest actor, and the
# average cost no training (241-243k env steps/s learning at 3 updates, as without it).
_AVERAGED_POLICY = ("averaged_policy_tau=0.01",)

# Tracking needs a wider action range than walking. Both algorithms squash actions into
# [-action_scale, action_scale], while the task's per-joint scales (0.25 effort / kp) were made
# for PPO, whose actions are unbounded. Reaching the default clip's joint angles from the
# default pose needs |action| up to 2.15 at the knees, 1.35 at the hip pitch, 2.0 at the
# shoulder yaw and 3.65 at the left wrist yaw: 15 of the 29 joints need more than 1. 4 covers
# them all.
_TRACK_ACTION_SCALE = 4.0
_TRACK_ACTION_RANGE = (f"action_scale={_TRACK_ACTION_SCALE}",)
# The 17 walk, jog and turn clips together need up to 5.3 at the knees (jogging) and 7.4 at the
# right wrist yaw.
_TRACK_WALK_RUN_ACTION_SCALE = 8.0
_TRACK_WALK_RUN_ACTION_RANGE = (f"action_scale={_TRACK_WALK_RUN_ACTION_SCALE}",)
# A training-curve proxy of the tracking evaluation's bar (unilab-eval: success >= 95%, MPKPE <=
# 40 mm): fewer than 5% of episodes end by a termination, and tracked bodies are within 4 cm of
# the relative reference on average. Not the length fraction: episodes start anywhere in the
# clip and end at its end, so even perfect tracking lasts about half an episode.
_TRACK_GOALS = ("collector/episode_failure_fraction<0.05", "env/metrics/motion/error_body_pos<0.04")

PRESETS: dict[str, TrainingPreset] = {
    "gpu_walk": TrainingPreset(
        description="G1 walking on one GPU: MuJoCo Warp, 4096 envs, 90 seconds (FastSAC) or 3 minutes (FlashSAC)",
        # FastSAC by default: on one H200 its seed 0 passed all 17 commands of the velocity sweep
        # after 210 s of training, and at 5, 7 and 9 minutes in a run that shared the GPU with a
        # second one; seeds 1 and 2 reached 17 and 16 at 15M env steps, then 16 and 15 (a
        # 0.5 rad/s turn in place); a later three-seed run (0, 1, 2 sharing the GPU) passed all
        # 17 on every seed at 28M; each seed alone for 90 s passed 15, 16 and 17 (seeds 0, 1, 2;
        # the misses were vx 1.5-2.0); seed 1 alone passed all 17 at 4 minutes. FlashSAC alone
        # passed all 17 at 7 and at 9 minutes (seed 0) and at 9 (seed 1), and learning beside
        # collection all 17 at 7 minutes (seeds 0 and 1); sharing the GPU, with the single-axis
        # share it passed 15 against 16 without, so its entry leaves that share out.
        task="g1_walk_flat", backend="mjwarp", algo="fastsac", num_envs=4096,
        # FastSAC: 90 s, after which it passed all 17 on seeds 0-3 with the off-axis weights
        # (20.3-21.5M env steps), and on seeds 4, 5 and 7 of 4-7 once an env step's replay draws
        # were one (22.8-23.3M; seed 6: 15). FlashSAC: 3 minutes at its walking pace, after which
        # its averaged actor, which it is judged by, passed all 17 on 10 of seeds 0-11 on H100s
        # (_FLASHSAC_WALK_PACE, _AVERAGED_POLICY).
        minutes={"fastsac": 1.5, "flashsac": 3.0},
        overrides={
            "flashsac": (_flashsac_g1(_WALK_ACTION_SCALE, _FLASHSAC_WALK_PACE) + _AVERAGED_POLICY
                         + _LEARN_BESIDE_COLLECTION + _GRAPHED_ENV),
            "fastsac": (_FASTSAC_G1 + _WALK_ACTION_RANGE + _WALK_SINGLE_AXIS_COMMANDS + _WALK_OFF_AXIS_WEIGHTS
                        + _GRAPHED_ENV),
        },
        # Episodes last > 90% of their 20 s and the planar velocity error is < 0.25 m/s.
        goals=("collector/episode_length_fraction>0.9", "env/metrics/twist/lin_vel_error<0.25"),
    ),
    "gpu_track": TrainingPreset(
        description="G1 tracking its default clip on one GPU: MuJoCo Warp, 4096 envs, 2 minutes "
                    "(FastSAC, judged by its averaged policy) or 9 (FlashSAC); the walking learner "
                    "settings with the action range tracking needs, FlashSAC's entropy target kept "
                    "at that range",
        # FastSAC by default: on an H200 it first passed the tracking evaluation (100%, 36.5 mm)
        # after 4 minutes, before its losses were compiled and its GEMMs padded; now at 2 minutes
        # with the averaged policy on three seeds (100%, 25.3-32.3 mm). FlashSAC after 9 minutes
        # (100%, 34.3 mm; one seed, judged by its latest actor).
        task="g1_motion_tracking", backend="mjwarp", algo="fastsac", num_envs=4096,
        minutes={"fastsac": 2.0, "flashsac": 9.0},
        overrides={"flashsac": _flashsac_g1(_TRACK_ACTION_SCALE, _FLASHSAC_PACE),
                   "fastsac": _FASTSAC_G1 + _TRACK_ACTION_RANGE + _AVERAGED_POLICY},
        goals=_TRACK_GOALS,
    ),
    "gpu_track_walk_run": TrainingPreset(
        description="G1 tracking the 17 pinned walk, jog and turn clips on one GPU: MuJoCo Warp, 4096 envs, "
                    "9 minutes (the tracking preset with the action range the whole set needs)",
        # FastSAC on an H200 after 9 minutes: 16 of 17 clips played through, 6 within 40 mm
        # (50.8 mm MPKPE over the set, still falling); FlashSAC: 15 played through, none within 40 mm
        # (118 mm). One seed each.
        task="g1_motion_tracking_walk_run", backend="mjwarp", algo="fastsac", num_envs=4096,
        minutes={"fastsac": 9.0, "flashsac": 9.0},
        overrides={"flashsac": _flashsac_g1(_TRACK_WALK_RUN_ACTION_SCALE, _FLASHSAC_PACE),
                   "fastsac": _FASTSAC_G1 + _TRACK_WALK_RUN_ACTION_RANGE},
        goals=_TRACK_GOALS,
    ),
}


def lookup_preset(name: str) -> TrainingPreset:
    if name not in PRESETS:
        raise ValueError(f"--preset: unknown preset {name!r}; valid: {sorted(PRESETS)}")
    return PRESETS[name]
