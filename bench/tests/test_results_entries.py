"""A training record's entry reads as today's presets: overrides a preset now holds are dropped."""

from unilab_bench.results.entries import as_presets_hold
from unilab_rl.cli.presets import PRESETS


def test_an_override_the_preset_now_holds_is_dropped_and_others_kept():
    walk = PRESETS["gpu_walk"].entries["fastsac"]
    held_env = next(iter(walk.env))
    held = f"{held_env}={walk.env[held_env]}"
    batch = walk.algo.batch_size
    entry = f"gpu_walk/fastsac {held} algo.batch_size={batch} batch_size={batch * 2} lr_made_up=1"
    assert as_presets_hold(entry) == f"gpu_walk/fastsac batch_size={batch * 2} lr_made_up=1"


def test_a_value_is_compared_as_its_field_reads_it():
    flash = PRESETS["gpu_walk"].entries["flashsac"]
    assert as_presets_hold(f"gpu_walk/flashsac updates_per_step={float(flash.algo.updates_per_step)}") == (
        "gpu_walk/flashsac")
    assert as_presets_hold(f"gpu_walk/flashsac updates_per_step={flash.algo.updates_per_step + 1}") != (
        "gpu_walk/flashsac")


def test_an_entry_of_an_unknown_preset_or_algorithm_is_left_as_recorded():
    assert as_presets_hold("no_such_preset/fastsac batch_size=1") == "no_such_preset/fastsac batch_size=1"
    assert as_presets_hold("gpu_walk/ppo batch_size=1") == "gpu_walk/ppo batch_size=1"
