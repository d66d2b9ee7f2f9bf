"""Named training presets: what ``unilab-train --preset NAME`` starts from.

A preset fixes a task, backend, env count, default algorithm and training goals (see
``unilab_rl.goals``), and gives each algorithm it was tuned for an entry: a budget, algorithm
settings (the algorithm's own config class; only the fields given apply), runner settings
(``RunnerConfig``) and env settings (dotted keys of the task's config). Everything is checked
when this module loads: a field a config lacks, a bad value, an env key the task lacks, a goal
that does not parse or a replay that could never start learning fails at import.

A run takes the entry as namespaced overrides ahead of its command line's
(``algo.batch_size=8192 ... env.cuda_graph=true``), so flags and overrides given there win.
The env part needs the task's config, so presets live here in the composition root.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from unilab.registry import task_config

from unilab_rl.algo_config import OffPolicyConfig
from unilab_rl.algorithms import ALGORITHMS
from unilab_rl.fastsac import FastSACConfig
from unilab_rl.flashsac import FlashSACConfig
from unilab_rl.goals import Goal
from unilab_rl.runner_config import RunnerConfig


def override_value(value: Any) -> str:
    """``value`` as the command line writes it (``true``, ``0.125``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def given_fields(config: BaseModel) -> dict[str, Any]:
    """The fields ``config`` was built with, in its class's field order (defaults left out)."""
    return {name: getattr(config, name) for name in type(config).model_fields if name in config.model_fields_set}


class PresetEntry(BaseModel):
    """One algorithm's part of a preset."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    minutes: float = Field(gt=0.0)  # the training budget: each algorithm learns at its own pace
    algo: OffPolicyConfig  # an instance of the algorithm's config class
    runner: RunnerConfig = Field(default_factory=RunnerConfig)
    env: dict[str, bool | int | float | str] = Field(default_factory=dict)

    def env_overrides(self) -> dict[str, str]:
        return {key: override_value(value) for key, value in self.env.items()}

    def overrides(self) -> list[str]:
        """The entry as command-line overrides, each under its namespace."""
        return [*(f"algo.{key}={override_value(v)}" for key, v in given_fields(self.algo).items()),
                *(f"runner.{key}={override_value(v)}" for key, v in given_fields(self.runner).items()),
                *(f"env.{key}={value}" for key, value in self.env_overrides().items())]


class TrainingPreset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str
    task: str
    backend: str
    algo: str  # the algorithm a run of this preset uses unless --algo says otherwise
    num_envs: int = Field(ge=1)
    entries: dict[str, PresetEntry]  # algorithm -> its entry
    goals: tuple[str, ...] = ()
    # Runs on a CUDA GPU as written (its backend, env count, graphs, learning beside collection):
    # refused up front on a machine without one unless the command line changes the backend.
    needs_cuda: bool = True

    @model_validator(mode="after")
    def _entries_fit_their_algorithms_and_the_task(self) -> TrainingPreset:
        unknown = sorted(set(self.entries) - set(ALGORITHMS))
        if unknown:
            raise ValueError(f"entries for unknown algorithms {unknown}; valid: {sorted(ALGORITHMS)}")
        if self.algo not in self.entries:
            raise ValueError(f"algo {self.algo!r} has no entry; entries: {sorted(self.entries)}")
        for name, entry in self.entries.items():
            expected = ALGORITHMS[name].config_class
            if type(entry.algo) is not expected:
                raise ValueError(f"entry {name!r}: algo is a {type(entry.algo).__name__}, expected {expected.__name__}")
            entry.algo.check_replay_holds_a_start(self.num_envs)
            task_config(self.task, entry.env_overrides())  # names the key or value the task refuses
        for goal in self.goals:
            Goal.parse(goal)
        return self

    def entry_for(self, algo: str) -> PresetEntry:
        if algo not in self.entries:
            raise ValueError(f"preset: no overrides tuned for --algo {algo}; tuned for: {sorted(self.entries)}")
        return self.entries[algo]

    def overrides_for(self, algo: str) -> list[str]:
        return self.entry_for(algo).overrides()

    def minutes_for(self, algo: str) -> float:
        return self.entry_for(algo).minutes


# Logging and checkpoints at the pace of thousands of env steps a second.
_G1_RUNNER = {"log_every": 50, "checkpoint_every": 1000}
# Updates on a CUDA stream of their own beside collection: the env and the learner share the
# GPU instead of taking turns, and the acting policy is one update stale.
_LEARN_BESIDE_COLLECTION = RunnerConfig(**_G1_RUNNER, overlap_learning=True)
# The env step replayed from CUDA graphs; evaluation, play and export decide this for themselves
# (unilab.config.task_overrides).
_GRAPHED_ENV = {"cuda_graph": True}
# A slow average of the actor, judged and deployed in its place; collection samples the latest.
_AVERAGED_POLICY = {"averaged_policy_tau": 0.01}

# Both learners squash actions into [-action_scale, action_scale], while the task's per-joint
# scales were made for PPO's unbounded actions. Walking: a stride at the command range's ends
# (vx 2.0 and -1.5 m/s) needs twice the unit range at the knees.
_WALK_ACTION_SCALE = 2.0
# Tracking: the default clip's joint angles need |action| up to 3.65 from the default pose.
_TRACK_ACTION_SCALE = 4.0
# The 17 walk, jog and turn clips need up to 7.4.
_TRACK_WALK_RUN_ACTION_SCALE = 8.0

_WALK_GOALS = (
    "collector/episode_length_fraction>0.9",  # episodes last most of their 20 s
    "env/metrics/twist/lin_vel_error<0.25",  # the planar velocity is tracked within 0.25 m/s
)
# A training-curve proxy of the tracking evaluation's bar (success >= 95%, MPKPE <= 40 mm). Not
# the length fraction: episodes start anywhere in the clip, so even perfect tracking lasts about
# half an episode.
_TRACK_GOALS = (
    "collector/episode_failure_fraction<0.05",  # fewer than 5% of episodes end by a termination
    "env/metrics/motion/error_body_pos<0.04",  # tracked bodies within 4 cm of the reference on average
)

# FlashSAC's entropy target is that of a Gaussian of std target_std at each action range, so it
# grows with log(action_scale); dividing this std by the scale keeps FastSAC's (about 0 per joint).
_FLASHSAC_STD_AT_SCALE_1 = 0.25


def _flashsac_g1(action_scale: float, **settings: Any) -> FlashSACConfig:
    """FlashSAC for the G1 at 4096 envs, at an action range; ``settings`` add to or replace these."""
    return FlashSACConfig(**{
        # The paper's reuse (2 updates of batch 2048 at 1024 envs) at 4x the envs: each
        # transition is still sampled about 4 times, in better-conditioned BatchNorm batches.
        "batch_size": 8192,
        "updates_per_step": 2,
        "learning_rate": 3e-4,
        "n_step": 3,
        "learning_starts": 131072,  # 32 vectorized steps before the first update
        "replay_capacity_per_env": 2048,  # 8.4M transitions, about 14 GB of fp32 observations
        "actor_width": 128, "actor_blocks": 2,
        "critic_width": 256, "critic_blocks": 2,
        "amp": True,
        "compile": True,  # fuses the networks' BatchNorm and elementwise chains
        "compile_losses": True,  # the loss math compiled around the networks: the same math, fewer kernels
        "gamma": 0.97,  # FastSAC's horizon: at 0.99 and the default target FlashSAC learns to stand
        "target_std": _FLASHSAC_STD_AT_SCALE_1 / action_scale,
        "action_scale": action_scale,
        **settings,
    })


def _fastsac_g1(**settings: Any) -> FastSACConfig:
    """FastSAC keeps its own defaults (batch 8192, 8 updates per env step); compiled networks and losses."""
    return FastSACConfig(compile=True, compile_losses=True, **settings)


PRESETS: dict[str, TrainingPreset] = {
    "gpu_walk": TrainingPreset(
        description="G1 walking on one GPU: MuJoCo Warp, 4096 envs, 90 seconds (FastSAC) or 3 minutes (FlashSAC)",
        task="g1_walk_flat", backend="mjwarp", algo="fastsac", num_envs=4096,
        entries={
            "flashsac": PresetEntry(
                minutes=3.0,
                # A faster target update (FastSAC's is 0.125, FlashSAC's own 0.01) walks within
                # the budget at 2 updates per env step.
                algo=_flashsac_g1(_WALK_ACTION_SCALE, target_tau=0.05, **_AVERAGED_POLICY),
                runner=_LEARN_BESIDE_COLLECTION,
                env=_GRAPHED_ENV,
            ),
            "fastsac": PresetEntry(
                minutes=1.5,
                algo=_fastsac_g1(action_scale=_WALK_ACTION_SCALE),
                runner=_LEARN_BESIDE_COLLECTION,
                env={
                    # Command draws with one nonzero axis, so turns in place and the range's
                    # ends are asked for often enough.
                    "commands.twist.single_axis_fraction": 0.3,
                    # mjlab's later off-axis weights (the task's default weighs both 1): the
                    # body's rocking while it steps costs a turn in place little of its reward.
                    "rewards.velocity.params.lin_vel_z_weight": 2.0,
                    "rewards.velocity.params.ang_vel_xy_weight": 0.05,
                    **_GRAPHED_ENV,
                },
            ),
        },
        goals=_WALK_GOALS,
    ),
    "gpu_track": TrainingPreset(
        description="G1 tracking its default clip on one GPU: MuJoCo Warp, 4096 envs, 2 minutes "
                    "(FastSAC, judged by its averaged policy) or 9 (FlashSAC); the walking learner "
                    "settings with the action range tracking needs, FlashSAC's entropy target kept "
                    "at that range",
        task="g1_motion_tracking", backend="mjwarp", algo="fastsac", num_envs=4096,
        entries={
            "flashsac": PresetEntry(minutes=9.0, algo=_flashsac_g1(_TRACK_ACTION_SCALE),
                                    runner=RunnerConfig(**_G1_RUNNER)),
            "fastsac": PresetEntry(minutes=2.0, algo=_fastsac_g1(action_scale=_TRACK_ACTION_SCALE, **_AVERAGED_POLICY),
                                   runner=_LEARN_BESIDE_COLLECTION),
        },
        goals=_TRACK_GOALS,
    ),
    "gpu_track_walk_run": TrainingPreset(
        description="G1 tracking the 17 pinned walk, jog and turn clips on one GPU: MuJoCo Warp, 4096 envs, "
                    "9 minutes (the tracking preset with the action range the whole set needs)",
        task="g1_motion_tracking_walk_run", backend="mjwarp", algo="fastsac", num_envs=4096,
        entries={
            "flashsac": PresetEntry(minutes=9.0, algo=_flashsac_g1(_TRACK_WALK_RUN_ACTION_SCALE),
                                    runner=RunnerConfig(**_G1_RUNNER)),
            "fastsac": PresetEntry(minutes=9.0, algo=_fastsac_g1(action_scale=_TRACK_WALK_RUN_ACTION_SCALE),
                                   runner=_LEARN_BESIDE_COLLECTION),
        },
        goals=_TRACK_GOALS,
    ),
}


def lookup_preset(name: str) -> TrainingPreset:
    if name not in PRESETS:
        raise ValueError(f"--preset: unknown preset {name!r}; valid: {sorted(PRESETS)}")
    return PRESETS[name]
