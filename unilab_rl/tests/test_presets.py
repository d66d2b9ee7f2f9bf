"""A preset is typed data checked when it is defined: a bad field, value, env key or goal is
refused at construction (so at import of the CLI), not when a run starts on a GPU machine."""

import pytest
from pydantic import ValidationError
from unilab_rl.cli.presets import PRESETS, PresetEntry, TrainingPreset
from unilab_rl.fastsac import FastSACConfig
from unilab_rl.flashsac import FlashSACConfig
from unilab_rl.runner_config import RunnerConfig


def preset(**changes):
    fields = {"description": "d", "task": "g1_walk_flat", "backend": "mjwarp", "algo": "fastsac", "num_envs": 4096,
              "entries": {"fastsac": PresetEntry(minutes=1.0, algo=FastSACConfig(compile=True))}, **changes}
    return TrainingPreset(**fields)


def test_a_valid_preset_gives_its_settings_as_namespaced_overrides():
    entry = PresetEntry(minutes=1.0, algo=FastSACConfig(compile=True, action_scale=2.0),
                        runner=RunnerConfig(overlap_learning=True), env={"cuda_graph": True, "decimation": 4})
    assert entry.overrides() == ["algo.action_scale=2.0", "algo.compile=true", "runner.overlap_learning=true",
                                 "env.cuda_graph=true", "env.decimation=4"]
    assert preset(entries={"fastsac": entry}).minutes_for("fastsac") == 1.0


@pytest.mark.parametrize(("build", "message"), [
    (lambda: FastSACConfig(batch_sise=512), "batch_sise"),  # a field the algorithm lacks
    (lambda: FlashSACConfig(target_std=-1.0), "target_std"),  # a value its config refuses
    (lambda: RunnerConfig(log_evry=50), "log_evry"),
    (lambda: PresetEntry(minutes=0.0, algo=FastSACConfig()), "minutes"),
    (lambda: preset(entries={"fastsac": PresetEntry(minutes=1.0, algo=FastSACConfig(),
                                                    env={"rewards.velocity.weights.nope": 1.0})}), "nope"),
    (lambda: preset(entries={"fastsac": PresetEntry(minutes=1.0, algo=FastSACConfig(),
                                                    env={"episode_length_s": "long"})}), "episode_length_s"),
    (lambda: preset(entries={"fastsac": PresetEntry(minutes=1.0, algo=FlashSACConfig())}),
     "algo is a FlashSACConfig, expected FastSACConfig"),
    (lambda: preset(entries={"ppo": PresetEntry(minutes=1.0, algo=FastSACConfig())}), "unknown algorithms ['ppo']"),
    (lambda: preset(algo="flashsac"), "algo 'flashsac' has no entry"),
    (lambda: preset(num_envs=8), "learning would never start"),
    (lambda: preset(goals=("collector/episode_length_fraction=0.9",)), "--goal"),
])
def test_a_bad_preset_definition_is_refused_at_construction(build, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        build()


def test_a_preset_entry_cannot_be_changed_after_it_was_checked():
    entry = PRESETS["gpu_walk"].entry_for("fastsac")
    with pytest.raises(ValidationError):
        entry.minutes = 5.0


def test_an_algorithm_without_an_entry_is_refused_naming_those_tuned():
    with pytest.raises(ValueError, match=r"no overrides tuned for --algo ppo; tuned for: \['fastsac', 'flashsac'\]"):
        PRESETS["gpu_walk"].overrides_for("ppo")
