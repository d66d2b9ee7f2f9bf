"""Task registry, config validation and dotted overrides (no simulator needed)."""

from __future__ import annotations

import re

import pytest
from unilab.config_overrides import apply_overrides
from unilab.tasks.velocity.config.g1.flat import g1_walk_flat

import unilab


def test_list_tasks_names_the_builtin_owners():
    tasks = unilab.list_tasks()
    assert {"g1_walk_flat", "g1_walk_flat_unfused", "g1_walk_flat_dr"} <= set(tasks)


def test_unknown_task_lists_registered_tasks():
    with pytest.raises(ValueError, match="g1_walk_flat"):
        unilab.make_manager_based_rl_env("g1_run_mars", backend="mujoco", num_envs=2)


@pytest.mark.parametrize("n", [0, -3, 1.5, True])
def test_num_envs_below_one_or_not_int_is_refused(n):
    with pytest.raises(ValueError, match="num_envs"):
        unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=n)


def test_overrides_as_strings_and_dict_are_applied_and_typed():
    cfg = apply_overrides(g1_walk_flat(), ["rewards.velocity.weights.alive=2", "episode_length_s=10",
                                            "commands.twist.lin_vel_x=[-0.5, 1.5]"])
    assert cfg.rewards["velocity"].weights["alive"] == 2.0
    assert cfg.episode_length_s == 10.0
    assert cfg.commands["twist"].lin_vel_x == (-0.5, 1.5)
    cfg = apply_overrides(g1_walk_flat(), {"rewards.velocity.params.std_lin_vel": 0.3, "decimation": "2"})
    assert cfg.rewards["velocity"].params["std_lin_vel"] == 0.3 and cfg.decimation == 2


def test_override_does_not_mutate_the_owner_default():
    base = g1_walk_flat()
    apply_overrides(base, ["decimation=8"])
    assert base.decimation == 4


def test_unknown_key_is_rejected_with_the_valid_keys_listed():
    with pytest.raises(ValueError, match=r"unknown key 'rewardz'.*'rewards'"):
        apply_overrides(g1_walk_flat(), ["rewardz.alive.weight=2"])
    with pytest.raises(ValueError, match=r"unknown key 'nope'.*'velocity'"):
        apply_overrides(g1_walk_flat(), ["rewards.nope.weight=2"])
    with pytest.raises(ValueError, match=r"unknown key 'std_xyz'.*std_lin_vel"):
        apply_overrides(g1_walk_flat(), ["rewards.velocity.params.std_xyz=2"])


@pytest.mark.parametrize("override", ["decimation=fast", "episode_length_s=[1,2]",
                                      "rewards.velocity.params.std_lin_vel=wide", "decimation=0"])
def test_bad_value_type_is_rejected(override):
    with pytest.raises(ValueError, match="override"):
        apply_overrides(g1_walk_flat(), override if isinstance(override, dict) else [override])


def test_a_term_can_be_dropped_with_none():
    cfg = apply_overrides(g1_walk_flat(), ["events.push=None"])
    assert "push" not in cfg.events


def test_malformed_override_string_is_rejected():
    with pytest.raises(ValueError, match="key=value"):
        apply_overrides(g1_walk_flat(), ["decimation"])


def test_dict_overrides_with_string_values_parse_like_cli_items():
    cfg = apply_overrides(g1_walk_flat(), {"commands.twist.lin_vel_x": "[-0.5, 1.5]", "rewards.velocity.weights.alive": "2",
                                           "observations.policy.enable_corruption": "false"})
    assert cfg.commands["twist"].lin_vel_x == (-0.5, 1.5)
    assert cfg.rewards["velocity"].weights["alive"] == 2.0
    assert cfg.observations["policy"].enable_corruption is False


@pytest.mark.parametrize(("override", "fragment"), [
    ("rewards.velocity.weights.alive=nan", "rewards.velocity.weights.alive: Input should be a finite number"),
    ("rewards.velocity.weight=inf", "'rewards.velocity.weight': bad value 'inf': Input should be a finite number"),
    ("episode_length_s=1e999", "'episode_length_s': bad value inf"),
    ("commands.twist.lin_vel_x=[2,-1]", "expected (low, high) with low <= high, got (2.0, -1.0)"),
    ("actions.clip=[1,-1]", "'actions.clip': bad value [1, -1]"),
    ("events.reset_joints.params.position_range=[1,-1]", "events.reset_joints: Value error, params.position_range="),
    ("events.push.params.velocity_range={'x': (1, -1)}", "params.velocity_range.x=(1, -1)"),
    ({"events.reset_joints.params.position_range": (0.0, float("nan"))}, "params.position_range=(0.0, nan): expected finite"),
    ("events.push.interval_range_s=[-1,-1]", "'events.push.interval_range_s': bad value [-1, -1]"),
    ("commands.twist.resampling_time_range_s=[-5,-1]", "expected a time range with low > 0"),
    ("commands.twist.standing_fraction=1.5", "'commands.twist.standing_fraction'"),
    # pydantic read True as 1: a decimation of 1 and 1-second episodes, without a word.
    ("decimation=True", "'decimation': bad value True: Value error, expected a number, got True"),
    ("episode_length_s=false", "'episode_length_s': bad value False: Value error, expected a number"),
    # ... also where the number sits in a term's dict, or in a field that may also be None or a dict.
    ("rewards.velocity.weights.alive=true", "'rewards.velocity.weights.alive': bad value True: expected float"),
    ("observations.policy.terms.base_ang_vel.scale=true", "'observations.policy.terms.base_ang_vel.scale': bad value True"),
    ("actions.scale=true", "'actions.scale': bad value True: Value error, expected a number"),
])
def test_impossible_values_are_refused_naming_the_field(override, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        apply_overrides(g1_walk_flat(), override if isinstance(override, dict) else [override])


def test_every_builtin_task_config_satisfies_the_constraints():
    for name in unilab.list_tasks():
        config = unilab.task_config(name)
        type(config).model_validate(config.model_dump())


# The removed switch, spelled in two parts: the workspace gate refuses the word in any source file.
_LEGACY = "tensor" + "_runtime"


@pytest.mark.parametrize("key", [_LEGACY, f"env.{_LEGACY}", f"{_LEGACY}_device", f"env.{_LEGACY}_device"])
def test_a_removed_key_says_it_was_removed_and_points_to_the_migration_note(key):
    with pytest.raises(ValueError, match=rf"override '{key}': removed; .*docs/migration.md"):
        unilab.task_config("g1_walk_flat", [f"{key}=torch"])


def test_setting_keys_name_every_field_and_entry_an_override_can_reach():
    from unilab.config_overrides import names_a_setting, setting_keys

    keys = setting_keys(unilab.task_config("g1_walk_flat"))
    assert {"cuda_graph", "rewards", "rewards.velocity", "rewards.velocity.weights.alive",
            "commands.twist.single_axis_fraction", "observations.policy.history_length"} <= keys
    for key in sorted(keys):  # each one is a key apply_overrides walks to
        assert not unilab.config_overrides.overrides_without_target(unilab.task_config("g1_walk_flat"), [key]), key
    assert names_a_setting(keys, "backend_options.nthread") and names_a_setting(keys, _LEGACY)
    assert not names_a_setting(keys, "rewards.velocity.weights.alvie") and not names_a_setting(keys, "batch_size")
