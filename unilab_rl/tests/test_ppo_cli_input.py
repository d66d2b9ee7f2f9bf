"""python -m unilab_rl.cli.ppo: the exported policy clamps as training and --play do, a resumed
run's counts include the model it resumed, and bad input exits 2 with an error naming the
argument, before --out exists."""

import json

import pytest
import torch
from fake_env import PointMassEnv
from unilab_rl.checkpoint import save_checkpoint
from unilab_rl.cli import ppo as ppo_cli

pytest.importorskip("rsl_rl")

TINY = ["actor.hidden_dims=[16,16]", "critic.hidden_dims=[16,16]", "num_steps_per_env=8",
        "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]


def point_factory(task, *, backend, num_envs, device, seed, overrides):
    return PointMassEnv(num_envs=num_envs, seed=seed)


def point_args(out, iterations, *extra):
    return ["--task", "point", "--backend", "fake", "--num-envs", "4", "--iterations", str(iterations),
            "--out", str(out), "--export", "none", *TINY, *extra]


def test_exported_policy_clamps_its_actions_as_training_and_play_do(tmp_path):
    unilab = pytest.importorskip("unilab")
    pytest.importorskip("onnxruntime")
    from unilab_rl.export import read_metadata, run_exported
    from unilab_rl.rsl_rl_vecenv import RslRlPolicy, RslRlVecEnv

    clip = 0.01
    out = tmp_path / "run"
    def g1_args(out, *extra):
        return ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "4", "--iterations", "1",
                "--out", str(out), *TINY, f"clip_actions={clip}", *extra]

    assert ppo_cli.main(g1_args(out)) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["clip_actions"] == clip

    # Real observations: a few steps of the walking task under the played policy.
    env = unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=3)
    try:
        vec = RslRlVecEnv(env)
        from rsl_rl.runners import OnPolicyRunner

        runner = OnPolicyRunner(vec, record["runner_cfg"], log_dir=None, device="cpu")
        runner.load(str(out / record["model"]))
        played = RslRlPolicy(runner.get_inference_policy(), clip_actions=clip)
        unclamped = RslRlPolicy(runner.get_inference_policy())
        obs = env.reset()
        observations, play_actions, raw_actions = [], [], []
        for _ in range(3):
            observations.append(obs["policy"])
            play_actions.append(played.act(obs, deterministic=True))
            raw_actions.append(unclamped.act(obs, deterministic=True))
            obs, *_ = env.step(play_actions[-1])
    finally:
        env.close()
    exported = run_exported(out / "policy.onnx", torch.cat(observations))
    assert torch.cat(raw_actions).abs().max() > clip  # the clamp matters for this policy
    assert exported.abs().max() <= clip + 1e-7
    assert torch.allclose(exported, torch.cat(play_actions), atol=1e-6)
    assert read_metadata(out / "policy.onnx")["output"]["clip"] == [-clip, clip]  # says so, too

    # Resumed for one more iteration: the export reports every env step behind it, and TorchScript clamps too.
    resumed = tmp_path / "resumed"
    assert ppo_cli.main(g1_args(resumed, "--resume", str(out / record["model"]), "--export", "torchscript")) == 0
    assert read_metadata(resumed / "policy.pt")["trained_env_steps"] == 2 * 8 * 4
    assert run_exported(resumed / "policy.pt", torch.cat(observations)).abs().max() <= clip + 1e-7


def test_resumed_run_counts_the_env_steps_and_time_of_the_model_it_resumed(tmp_path):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    assert ppo_cli.main(point_args(first, 2), factory=point_factory) == 0
    before = json.loads((first / "run.json").read_text())
    assert before["env_steps"] == 2 * 8 * 4
    model = first / before["model"]
    assert ppo_cli.main(point_args(resumed, 2, "--resume", str(model)), factory=point_factory) == 0
    after = json.loads((resumed / "run.json").read_text())
    assert after["env_steps"] == 4 * 8 * 4
    assert after["wall_s"] > before["wall_s"]
    # The saved model carries the counts itself, so resuming it again continues from them.
    saved = torch.load(resumed / after["model"], weights_only=False)["infos"]
    assert saved[ppo_cli.COUNTERS]["env_steps"] == after["env_steps"]
    assert saved[ppo_cli.ENV_STATE] == {"steps": 4 * 8}  # the resumed env went on from the model's count


def test_a_resumed_run_carries_the_env_state_and_a_model_without_it_is_refused(tmp_path, capsys):
    first, resumed = tmp_path / "first", tmp_path / "resumed"
    assert ppo_cli.main(point_args(first, 2), factory=point_factory) == 0
    model = first / json.loads((first / "run.json").read_text())["model"]
    saved = torch.load(model, weights_only=False)
    assert saved["infos"][ppo_cli.ENV_STATE] == {"steps": 2 * 8}  # the fake env's own step count
    torch.save({**saved, "infos": None}, model)  # as models were saved before they carried the env's state
    capsys.readouterr()
    assert ppo_cli.main(point_args(resumed, 2, "--resume", str(model)), factory=point_factory) == 2
    assert "holds no env training state" in capsys.readouterr().err
    assert not resumed.exists()


def _empty_file(tmp_path):
    path = tmp_path / "empty.pt"
    path.write_bytes(b"")
    return path


def _unilab_rl_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"agent": {"actor": torch.zeros(2)}, "step": 0})
    return path


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume", _empty_file], "--resume"),
        (["--resume", _unilab_rl_checkpoint], "expected an rsl_rl model"),
        (["save_interval=0"], "save_interval: expected an int >= 1, got 0"),
        (["algorithm.num_mini_batches=0"], "algorithm.num_mini_batches: expected an int >= 1, got 0"),
        (["algorithm.num_learning_epochs=0"], "algorithm.num_learning_epochs: expected an int >= 1, got 0"),
        (["num_steps_per_env=0"], "num_steps_per_env: expected an int >= 1, got 0"),
        (["clip_actions=abc"], "clip_actions: expected a finite number > 0 or None, got 'abc'"),
        (["clip_actions=-1"], "clip_actions: expected a finite number > 0 or None, got -1"),
        (["algorithm.num_mini_batches=33"], "algorithm.num_mini_batches: expected at most the rollout's 32 samples"),
    ],
)
def test_bad_input_exits_2_naming_the_argument_and_leaves_no_out(tmp_path, capsys, extra, message):
    extra = [str(token(tmp_path)) if callable(token) else token for token in extra]
    out = tmp_path / "run"
    assert ppo_cli.main(point_args(out, 1, *extra), factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("unilab-ppo: error: ") and message in err
    assert not out.exists()


def test_a_resumed_model_of_other_networks_is_refused_naming_resume(tmp_path, capsys):
    first = tmp_path / "first"
    assert ppo_cli.main(point_args(first, 1), factory=point_factory) == 0
    model = first / json.loads((first / "run.json").read_text())["model"]
    out = tmp_path / "run"
    argv = [*point_args(out, 1, "--resume", str(model)), "actor.hidden_dims=[8,8]"]
    assert ppo_cli.main(argv, factory=point_factory) == ppo_cli.EXIT_BAD_INPUT
    assert f"--resume {model}: does not fit" in capsys.readouterr().err
    assert not out.exists()
