"""rsl_rl PPO through the VecEnv adapter: the contract's semantics reach rsl_rl as its own
convention, PPO learns on the point mass, and the CLI trains, saves and exports on the real
env (unilab, mujoco, CPU). The G1 learning check is slow (make test-all)."""

import contextlib
import copy
import dataclasses
import io
import json

import pytest
import torch
from fake_env import PointMassEnv
from unilab_rl.cli import evaluate as eval_cli
from unilab_rl.cli import ppo as ppo_cli
from unilab_rl.cli.play import run_episodes

rsl_rl = pytest.importorskip("rsl_rl")
from rsl_rl.env import VecEnv  # noqa: E402
from rsl_rl.runners import OnPolicyRunner  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from unilab_rl.rsl_rl_vecenv import RslRlPolicy, RslRlVecEnv  # noqa: E402


class RecordingPointMass(PointMassEnv):
    """Keeps the last action it was given and the last info it returned."""

    def step(self, action):
        self.last_action = action.clone()
        output = super().step(action)
        self.last_info = output[4]
        return output


class UniformRandomPolicy:
    def __init__(self, action_dim: int, seed: int = 0) -> None:
        self.action_dim = action_dim
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, obs, deterministic):
        return torch.rand(obs["policy"].shape[0], self.action_dim, generator=self.generator) * 2 - 1


def test_adapter_presents_the_contract_in_rsl_rls_convention():
    env = RecordingPointMass(num_envs=4, max_episode_length=5)
    vec = RslRlVecEnv(env, clip_actions=0.5, metrics_every=5)
    assert isinstance(vec, VecEnv)
    assert (vec.num_envs, vec.num_actions, vec.max_episode_length, vec.device) == (4, 1, 5, torch.device("cpu"))
    obs = vec.get_observations()
    assert isinstance(obs, TensorDict) and tuple(obs.batch_size) == (4,) and set(obs.keys()) == {"policy", "critic"}

    for step in range(1, 6):
        obs, reward, dones, extras = vec.step(torch.full((4, 1), 3.0))
        assert torch.equal(env.last_action, torch.full((4, 1), 0.5))  # clip_actions applied before the env
        assert dones.dtype == torch.long and reward.shape == (4,)
        assert torch.equal(extras["time_outs"], torch.full((4,), step == 5))  # truncation is rsl_rl's time-out
        assert "reward_mean" in extras["log"]  # the env's info["log"] passes through
        assert ("env/fake_phase_ms" in extras["log"]) == (step == 5)  # flush_metrics every metrics_every steps
        if step < 5:
            assert torch.equal(vec.episode_length_buf, torch.full((4,), step))
    assert torch.equal(dones, torch.ones(4, dtype=torch.long))
    assert torch.equal(vec.episode_length_buf, torch.zeros(4, dtype=torch.long))
    # the pre-reset final observation rides along; obs is already the new episode's
    assert torch.equal(extras["final_obs"]["critic"], env.last_info["final_obs"]["critic"])
    assert torch.all(extras["final_obs"]["critic"][:, 3] == 1.0) and torch.all(obs["critic"][:, 3] == 0.0)
    assert torch.equal(vec.get_observations()["policy"], obs["policy"])

    with pytest.raises(ValueError, match="init_at_random_ep_len=False"):
        vec.episode_length_buf = torch.zeros(4, dtype=torch.long)
    vec.close()
    assert env.closed


def _point_mass_runner_cfg():
    cfg, _ = ppo_cli.split_ppo_overrides(["actor.hidden_dims=[32,32]", "critic.hidden_dims=[32,32]",
                                          "num_steps_per_env=16", "algorithm.num_mini_batches=2"])
    cfg.pop("clip_actions")
    return cfg


def test_ppo_learns_the_point_mass_and_beats_random_and_its_initial_policy():
    torch.manual_seed(0)
    vec = RslRlVecEnv(PointMassEnv(num_envs=32, max_episode_length=20, seed=0))
    with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints the models
        runner = OnPolicyRunner(vec, _point_mass_runner_cfg(), log_dir=None, device="cpu")
    initial = copy.deepcopy(runner.alg.get_policy()).eval()
    runner.learn(40)
    trained = runner.get_inference_policy()

    def evaluate(agent):
        return run_episodes(PointMassEnv(num_envs=16, max_episode_length=20, seed=123), agent, 64)["return_mean"]

    scores = {"trained": evaluate(RslRlPolicy(trained)), "initial": evaluate(RslRlPolicy(initial)),
              "random": evaluate(UniformRandomPolicy(1))}
    print(f"point mass, mean episode return: {scores}")
    assert scores["trained"] > scores["random"] + 1.0
    assert scores["trained"] > scores["initial"] + 1.0


def fake_factory(task, *, backend, num_envs, device, seed, overrides):
    if overrides:
        raise ValueError(f"override {sorted(overrides)[0]!r}: unknown key; valid keys: []")
    return PointMassEnv(num_envs=num_envs, seed=seed)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["algorithm.learnin_rate=1e-3"], "rsl_rl rejected the runner config"),
        (["algorithm.gamma.x=1"], "'gamma' is not a section of the rsl_rl runner config"),
        (["rewards.nope=1"], "valid keys"),
        (["--iterations", "0"], "--iterations and --num-envs must be >= 1"),
        (["--resume", "missing.pt"], "no such file"),
        (["--play", "missing.pt"], "expected an rsl_rl model with the run.json of its run beside it"),
    ],
)
def test_bad_input_is_refused_before_training(tmp_path, capsys, extra, message):
    argv = ["--task", "point", "--backend", "fake", "--num-envs", "4", "--iterations", "1", "--out",
            str(tmp_path / "run"), "--export", "none", *extra]
    assert ppo_cli.main(argv, factory=fake_factory) == ppo_cli.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("run/model_*.pt"))


TINY_PPO = ["actor.hidden_dims=[32,32]", "critic.hidden_dims=[32,32]", "num_steps_per_env=8",
            "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=2"]


def test_ppo_cli_trains_on_mujoco_saves_resumes_plays_and_exports_with_metadata(tmp_path, capsys):
    unilab = pytest.importorskip("unilab")
    onnxruntime = pytest.importorskip("onnxruntime")
    def g1_args(out, iterations):
        return ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "4", "--iterations", str(iterations),
                "--out", str(out), *TINY_PPO]

    out = tmp_path / "run"
    assert ppo_cli.main(g1_args(out, 2)) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["algo"] == "rsl_rl_ppo" and record["env_steps"] == 2 * 8 * 4 and record["model"] == "model_1.pt"
    assert (out / "model_1.pt").is_file()

    metadata = json.loads((out / "policy.json").read_text())
    assert metadata["task"] == "g1_walk_flat" and metadata["algo"] == "rsl_rl_ppo"
    assert len(metadata["joint_names"]) == metadata["output"]["shape"][1] == 29
    env = unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=2, seed=3)
    try:
        vec = RslRlVecEnv(env)
        with contextlib.redirect_stdout(io.StringIO()):
            runner = OnPolicyRunner(vec, ppo_cli.split_ppo_overrides(TINY_PPO)[0] | {"clip_actions": None},
                                    log_dir=None, device="cpu")
        runner.load(str(out / "model_1.pt"))
        obs = vec.get_observations()
        torch_actions = runner.get_inference_policy()(obs)
    finally:
        env.close()
    session = onnxruntime.InferenceSession(str(out / "policy.onnx"), providers=["CPUExecutionProvider"])
    (onnx_actions,) = session.run(["actions"], {"obs": obs["policy"].numpy()})
    difference = (torch.from_numpy(onnx_actions) - torch_actions).abs().max().item()
    print(f"PPO policy, onnxruntime vs torch: max abs difference {difference:.3g}")
    assert difference < 1e-5
    # The exported PPO policy is judged by the task's own evaluation, as any unilab-export file is.
    assert metadata["backend"] == "mujoco" and metadata["trained_wall_s"] > 0
    report_dir = tmp_path / "eval"
    assert eval_cli.main(["--policy", str(out / "policy.onnx"), "--out", str(report_dir), "--no-plot",
                          "eval.envs_per_command=1", "eval.seconds=0.4", "eval.settle_s=0.1"]) == 1
    report = json.loads((report_dir / "report.json").read_text())
    assert report["algo"] == "rsl_rl_ppo" and len(report["reports"]["mujoco"]["cases"]) == 17

    before = torch.load(out / "model_1.pt", weights_only=False)["actor_state_dict"]
    resumed = tmp_path / "resumed"
    assert ppo_cli.main([*g1_args(resumed, 1), "--resume", str(out / "model_1.pt"), "--export", "none"]) == 0
    # rsl_rl restarts at the saved iteration index, so the resumed run writes model_1.pt again
    after = torch.load(resumed / json.loads((resumed / "run.json").read_text())["model"], weights_only=False)
    assert after["iter"] == 1
    changed = [k for k in before if not torch.equal(before[k], after["actor_state_dict"][k])]
    assert changed  # one more update on top of the loaded weights

    capsys.readouterr()
    assert ppo_cli.main(["--play", str(out / "model_1.pt"), "--num-envs", "2", "--episodes", "2"]) == 0
    played = capsys.readouterr().out
    assert "task=g1_walk_flat backend=mujoco" in played and "return_mean" in played
    assert "env/metrics/twist/lin_vel_error" in played


@pytest.mark.slow
def test_ppo_on_g1_mujoco_cpu_beats_random_and_its_initial_policy():
    """150 iterations at 32 envs (about 35 s on 2 cores)."""
    unilab = pytest.importorskip("unilab")
    torch.manual_seed(0)
    cfg, _ = ppo_cli.split_ppo_overrides(["actor.hidden_dims=[128,128]", "critic.hidden_dims=[128,128]",
                                          "actor.distribution_cfg.init_std=0.5"])
    cfg.pop("clip_actions")
    env = unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=32, seed=0)
    try:
        vec = RslRlVecEnv(env)
        with contextlib.redirect_stdout(io.StringIO()):
            runner = OnPolicyRunner(vec, cfg, log_dir=None, device="cpu")
            initial = copy.deepcopy(runner.alg.get_policy()).eval()
            runner.learn(150)
        trained = runner.get_inference_policy()
    finally:
        env.close()

    def evaluate(agent):
        eval_env = unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=16, seed=123)
        try:
            return run_episodes(eval_env, agent, 32)["return_mean"]
        finally:
            eval_env.close()

    scores = {"trained": evaluate(RslRlPolicy(trained)), "initial": evaluate(RslRlPolicy(initial)),
              "random": evaluate(UniformRandomPolicy(env.action_dim))}
    print(f"g1_walk_flat, mean episode return: {scores}")
    assert scores["trained"] > scores["random"] + 1.0
    assert scores["trained"] > scores["initial"] + 0.5


def test_the_mirror_augmentation_is_each_batch_then_its_reflection():
    from unilab_rl.rsl_rl_vecenv import mirror_augmentation

    vec = RslRlVecEnv(PointMassEnv(num_envs=4))
    obs = vec.get_observations()
    actions = torch.randn(4, 1)
    both_obs, both_actions = mirror_augmentation(vec, obs, actions)
    assert both_obs.batch_size[0] == 8 and torch.equal(both_obs["policy"][:4], obs["policy"])
    assert torch.equal(both_obs["policy"][4:], -obs["policy"])  # position, velocity, target reflect
    assert torch.equal(both_obs["critic"][4:, 3], obs["critic"][:, 3])  # the episode time does not
    assert torch.equal(both_actions, torch.cat((actions, -actions)))
    vec.spec = dataclasses.replace(vec.spec, mirrors=None)
    with pytest.raises(ValueError, match="declares no left-right mirror"):
        mirror_augmentation(vec, obs, actions)


def test_ppo_with_symmetry_augmentation_learns_the_point_mass(monkeypatch):
    from unilab_rl import rsl_rl_vecenv

    calls = []

    def counted(env, obs=None, actions=None):
        calls.append(obs is not None)
        return rsl_rl_vecenv.mirror_augmentation(env, obs, actions)

    torch.manual_seed(0)
    vec = RslRlVecEnv(PointMassEnv(num_envs=32, max_episode_length=20, seed=0))
    cfg = _point_mass_runner_cfg()
    cfg["algorithm"]["symmetry_cfg"] = {"use_data_augmentation": True, "use_mirror_loss": False,
                                        "mirror_loss_coeff": 0.0, "data_augmentation_func": counted}
    with contextlib.redirect_stdout(io.StringIO()):
        runner = OnPolicyRunner(vec, cfg, log_dir=None, device="cpu")
    runner.learn(40)
    # Every mini-batch was augmented (obs given); rsl_rl also mirrors the action means alone to
    # log its mirror loss (obs None).
    assert calls.count(True) >= 40 * 2 and calls.count(True) == calls.count(False)
    trained = RslRlPolicy(runner.get_inference_policy())
    score = run_episodes(PointMassEnv(num_envs=16, max_episode_length=20, seed=123), trained, 64)["return_mean"]
    random_score = run_episodes(PointMassEnv(num_envs=16, max_episode_length=20, seed=123), UniformRandomPolicy(1),
                                64)["return_mean"]
    assert score > random_score + 1.0


def test_symmetry_for_a_task_without_a_mirror_is_refused_before_training(tmp_path, capsys):
    def unmirrored(task, **kwargs):
        env = fake_factory(task, **kwargs)
        env.mirrors = None
        return env

    argv = ["--task", "point", "--backend", "fake", "--num-envs", "4", "--iterations", "1", "--out",
            str(tmp_path / "run"), "--export", "none", "--symmetry"]
    assert ppo_cli.main(argv, factory=unmirrored) == ppo_cli.EXIT_BAD_INPUT
    assert "--symmetry: task 'point' declares no left-right mirror" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_ppo_cli_with_symmetry_trains_the_walking_task_from_its_declared_mirror(tmp_path):
    pytest.importorskip("unilab")
    out = tmp_path / "run"
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--num-envs", "4", "--iterations", "1", "--out", str(out),
            "--export", "none", "--symmetry", *TINY_PPO]
    assert ppo_cli.main(argv) == 0
    assert json.loads((out / "run.json").read_text())["symmetry"] is True
