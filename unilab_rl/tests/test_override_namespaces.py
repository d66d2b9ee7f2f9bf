"""key=value overrides route by namespace (algo., runner., env.); a bare key only where it names
one setting. An ambiguous, misplaced or misspelled key is refused (exit 2) naming the namespaced
forms or the nearest valid key, before any env is built."""

import pytest
from unilab_rl.algorithms import lookup
from unilab_rl.cli import ppo as ppo_cli
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.overrides import OverrideError, env_namespace, split_overrides
from unilab_rl.runner_config import RunnerConfig

pytest.importorskip("unilab")
FLASHSAC = lookup("flashsac").config_class
WALK = env_namespace("g1_walk_flat")


def split(*tokens):
    return split_overrides(list(tokens), FLASHSAC, RunnerConfig, WALK)


def refused_by_unilab_train(tmp_path, capsys, *tokens) -> str:
    def no_env(*args, **kwargs):
        raise AssertionError("an env was built for a command whose overrides were refused")

    out = tmp_path / "run"
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "4", "--steps", "8", "--out", str(out),
            "--no-progress", "--no-tensorboard", *tokens]
    assert train_cli.main(argv, factory=no_env, tasks=["g1_walk_flat"]) == train_cli.EXIT_BAD_INPUT
    assert not out.exists()
    return capsys.readouterr().err


def test_namespaced_keys_reach_their_config_and_unique_bare_keys_are_taken_where_they_are():
    routed = split("algo.cuda_graph=false", "env.cuda_graph=true", "runner.log_every=10", "batch_size=512",
                   "overlap_learning=true", "episode_length_s=10", "rewards.velocity.weights.alive=2",
                   "backend_options.nthread=2")
    assert routed.algo == {"cuda_graph": "false", "batch_size": "512"}
    assert routed.runner == {"log_every": "10", "overlap_learning": "true"}
    assert routed.env == {"cuda_graph": "true", "episode_length_s": "10", "rewards.velocity.weights.alive": "2",
                          "backend_options.nthread": "2"}


def test_the_later_of_two_spellings_of_one_setting_wins():
    assert split("algo.batch_size=1", "batch_size=2").algo == {"batch_size": "2"}
    assert split("batch_size=2", "algo.batch_size=3").algo == {"batch_size": "3"}


def test_a_bare_key_that_two_namespaces_name_is_refused_naming_both_forms(tmp_path, capsys):
    error = refused_by_unilab_train(tmp_path, capsys, "cuda_graph=true")
    assert ("override 'cuda_graph': ambiguous, it is both algo.cuda_graph (the algorithm's) and env.cuda_graph "
            "(the env's); write the one you mean") in error


def test_a_misspelled_key_is_refused_naming_the_nearest_key_with_its_namespace(tmp_path, capsys):
    error = refused_by_unilab_train(tmp_path, capsys, "batch_sise=512")
    assert ("override 'batch_sise': unknown key, not a setting of the algorithm, runner or env; did you mean "
            "algo.batch_size?") in error
    with pytest.raises(OverrideError, match=r"did you mean env.rewards.velocity.weights.alive\?; valid keys under "
                                            r"env.rewards.velocity.weights: action_rate, alive, "):
        split("rewards.velocity.weights.alvie=2")
    with pytest.raises(OverrideError, match=r"unknown runner key 'log_evry'; did you mean runner.log_every\?"):
        split("runner.log_evry=2")


@pytest.mark.parametrize(("token", "message"), [
    ("algo.episode_length_s=10", "override 'algo.episode_length_s': unknown algorithm key 'episode_length_s'; "
                                 "it is env.episode_length_s"),
    ("env.batch_size=512", "override 'env.batch_size': unknown env key 'batch_size'; it is algo.batch_size"),
    ("runner.batch_size=512", "override 'runner.batch_size': unknown runner key 'batch_size'; it is algo.batch_size"),
    ("algo.log_every=5", "override 'algo.log_every': unknown algorithm key 'log_every'; it is runner.log_every"),
])
def test_a_key_under_the_wrong_namespace_is_refused_naming_the_right_one(tmp_path, capsys, token, message):
    assert message in refused_by_unilab_train(tmp_path, capsys, token)


def test_a_preset_entry_routes_as_given_and_the_command_line_still_wins(tmp_path):
    from unilab_rl.cli import train_plan

    args = train_cli.build_parser().parse_intermixed_args(["--preset", "gpu_walk", "--out", str(tmp_path),
                                                           "algo.compile=false", "env.cuda_graph=false"])
    plan = train_plan.prepare(args, ["g1_walk_flat"], check_out=False)
    assert plan["algo_config"].compile is False and plan["algo_config"].cuda_graph is True
    assert plan["env_overrides"]["cuda_graph"] == "false"


def test_ppo_routes_its_runner_config_and_the_env_the_same_way(capsys):
    runner, env = ppo_cli.split_ppo_overrides(["runner.num_steps_per_env=8", "algorithm.gamma=0.9",
                                               "env.episode_length_s=5", "decimation=2"], WALK)
    assert (runner["num_steps_per_env"], runner["algorithm"]["gamma"]) == (8, 0.9)
    assert env == {"episode_length_s": "5", "decimation": "2"}
    assert ppo_cli.main(["--task", "g1_walk_flat", "num_step_per_env=8"]) == ppo_cli.EXIT_BAD_INPUT
    assert ("override 'num_step_per_env': unknown key, not a setting of the rsl_rl runner or env; did you mean "
            "runner.num_steps_per_env?") in capsys.readouterr().err

