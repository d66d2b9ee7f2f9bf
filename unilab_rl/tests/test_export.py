"""Policy export: the exported file computes what the torch policy computes, and carries the
metadata a deployment needs, read from the real env (unilab, mujoco, CPU)."""

import json
import subprocess
import sys

import pytest
import torch
from fake_env import PointMassEnv
from helpers import TINY, tiny_agent
from unilab_rl.checkpoint import load_checkpoint
from unilab_rl.cli import export as export_cli
from unilab_rl.cli import train as train_cli
from unilab_rl.cli.export_metadata import task_fingerprint
from unilab_rl.export import export_policy, metadata_path, read_metadata, run_exported
from unilab_rl.policy import load_policy

unilab = pytest.importorskip("unilab")
onnxruntime = pytest.importorskip("onnxruntime")

TASK = "g1_walk_flat"
ALGOS = sorted(TINY)
# float32 rounding of the same graph in two runtimes; seen: 1e-8 (FastSAC), 9e-7 (FlashSAC).
ONNX_TOLERANCE = 1e-5


@pytest.mark.parametrize("algo", ALGOS)
def test_deterministic_policy_module_is_the_agents_deterministic_action(algo):
    env, _, agent = tiny_agent(algo)
    obs = env.reset()
    for _ in range(3):  # move the normalizer statistics away from their initial values
        agent.observe(obs, torch.zeros(env.num_envs), torch.zeros(env.num_envs, dtype=torch.bool),
                      torch.zeros(env.num_envs, dtype=torch.bool))
        obs, *_ = env.step(agent.act(obs, deterministic=False))
    policy = agent.deterministic_policy()
    assert not policy.training and not any(p.requires_grad for p in policy.parameters())
    torch.testing.assert_close(policy(obs["policy"]), agent.act(obs, deterministic=True), rtol=0, atol=0)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_policy_writes_the_file_and_its_metadata_three_ways(tmp_path, fmt):
    env, _, agent = tiny_agent("fastsac", PointMassEnv(num_envs=4))
    path = tmp_path / ("policy.onnx" if fmt == "onnx" else "policy.pt")
    metadata = {"task": "point_mass", "joint_names": ["x"], "control_dt": 0.1}
    sidecar = export_policy(agent.deterministic_policy(), env.observation_spec["policy"], path, fmt, metadata)
    assert sidecar == metadata_path(path) == tmp_path / "policy.json"
    assert json.loads(sidecar.read_text()) == metadata
    assert read_metadata(path) == metadata
    obs = torch.randn(5, env.observation_spec["policy"])  # a batch size the export never saw
    expected = agent.act({"policy": obs}, deterministic=True)
    torch.testing.assert_close(run_exported(path, obs), expected, rtol=0, atol=ONNX_TOLERANCE)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A few hundred env steps of each algorithm on the real task: enough to move the
    normalizers and weights away from initialization, cheap enough for the fast suite."""
    paths = {}
    for algo in ALGOS:
        out = tmp_path_factory.mktemp(f"run_{algo}")
        tokens = [f"{k}={v}" for k, v in TINY[algo].items()]
        argv = ["--task", TASK, "--backend", "mujoco", "--algo", algo, "--num-envs", "4", "--steps", "256",
                "--out", str(out), "--no-progress", "--no-tensorboard", *tokens]
        assert train_cli.main(argv) == 0
        paths[algo] = out / "checkpoint.pt"
    return paths


def _rollout(document, steps=48):
    """Policy observations of a deterministic rollout and the torch policy's actions."""
    env = unilab.make_manager_based_rl_env(TASK, backend="mujoco", num_envs=2, seed=7,
                                           overrides=dict(document["env_overrides"]))
    try:
        agent = load_policy(document, env)
        return export_cli.rollout_observations(env, lambda obs: agent.act(obs, deterministic=True), steps)
    finally:
        env.close()


@pytest.mark.filterwarnings("error::torch.jit.TracerWarning")
@pytest.mark.parametrize("algo", ALGOS)
def test_onnx_policy_run_by_onnxruntime_matches_torch_on_env_observations(tmp_path, checkpoints, algo, capsys):
    out = tmp_path / "policy.onnx"
    assert export_cli.main(["--checkpoint", str(checkpoints[algo]), "--format", "onnx", "--out", str(out)]) == 0
    assert "max abs difference" in capsys.readouterr().out

    observations, torch_actions = _rollout(load_checkpoint(checkpoints[algo]))
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (onnx_actions,) = session.run(["actions"], {"obs": observations.numpy()})
    difference = (torch.from_numpy(onnx_actions) - torch_actions).abs().max().item()
    print(f"{algo}: onnxruntime vs torch on {observations.shape[0]} env observations: max abs difference {difference:.3g}")
    assert onnx_actions.shape == tuple(torch_actions.shape)
    assert difference < ONNX_TOLERANCE


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
# The trace branches on no size in Python (the GEMM padding pads by what the graph computes).
@pytest.mark.filterwarnings("error::torch.jit.TracerWarning")
@pytest.mark.parametrize("algo", ALGOS)
def test_torchscript_policy_matches_torch_on_env_observations(tmp_path, checkpoints, algo):
    out = tmp_path / "policy.pt"
    assert export_cli.main(["--checkpoint", str(checkpoints[algo]), "--format", "torchscript", "--out", str(out),
                            "--verify-steps", "0"]) == 0
    observations, torch_actions = _rollout(load_checkpoint(checkpoints[algo]))
    with torch.no_grad():
        scripted = torch.jit.load(str(out))(observations)
    torch.testing.assert_close(scripted, torch_actions, rtol=0, atol=ONNX_TOLERANCE)
    assert read_metadata(out) == json.loads(metadata_path(out).read_text())


def test_metadata_describes_observations_joints_actions_and_the_task(tmp_path, checkpoints):
    out = tmp_path / "policy.onnx"
    assert export_cli.main(["--checkpoint", str(checkpoints["fastsac"]), "--out", str(out), "--verify-steps", "0"]) == 0
    metadata = read_metadata(out)
    assert metadata == json.loads(metadata_path(out).read_text())

    env = unilab.make_manager_based_rl_env(TASK, backend="mujoco", num_envs=1)
    try:
        layout = env.observation_manager.describe()["policy"]
        assert [(t["name"], t["width"]) for t in metadata["observation"]["terms"]] == list(layout.items())
        assert metadata["observation"]["dim"] == metadata["input"]["shape"][1] == env.observation_spec["policy"]
        assert metadata["joint_names"] == list(env.action_manager.joint_names)
        assert metadata["output"]["shape"][1] == len(metadata["joint_names"]) == env.action_dim == 29
        assert metadata["action_scale"] == env.action_manager.scale.tolist()
        assert metadata["action_offset"] == env.action_manager.offset.tolist()
        keyframe = env.default_joint_pos[env.action_manager.cols].tolist()
        assert metadata["default_joint_pos"] == keyframe
        assert len(metadata["joint_stiffness"]) == 29 and all(kp > 0 for kp in metadata["joint_stiffness"])
        assert metadata["control_dt"] == pytest.approx(env.step_dt) == pytest.approx(0.02)
    finally:
        env.close()
    assert metadata["task"] == TASK and metadata["algo"] == "fastsac" and metadata["backend"] == "mujoco"
    counters = load_checkpoint(checkpoints["fastsac"])["counters"]
    assert metadata["trained_wall_s"] == pytest.approx(counters["wall_s"]) and metadata["trained_wall_s"] > 0
    assert metadata["task_fingerprint"] == task_fingerprint(TASK, {})
    assert metadata["commands"] == {"twist": "uniform_velocity"}
    assert metadata["actor"] == "latest"  # the run kept no averaged policy


def test_task_fingerprint_is_stable_across_processes_and_changes_with_the_config():
    here = task_fingerprint(TASK, {})
    there = subprocess.run([sys.executable, "-c", "from unilab_rl.cli.export_metadata import task_fingerprint; "
                            f"print(task_fingerprint({TASK!r}, {{}}))"], capture_output=True, text=True, check=True)
    assert there.stdout.strip() == here
    assert task_fingerprint(TASK, {"rewards.velocity.weights.alive": "2"}) != here
    assert task_fingerprint("g1_walk_flat_play", {}) != here


def test_a_missing_checkpoint_is_bad_input(tmp_path, capsys):
    assert export_cli.main(["--checkpoint", str(tmp_path / "nope.pt")]) == export_cli.EXIT_BAD_INPUT
    assert "does not exist" in capsys.readouterr().err


def _policy_mirror():
    """The task's (policy observation, action) reflections, on the CPU."""
    env = unilab.make_manager_based_rl_env(TASK, backend="mujoco", num_envs=1)
    try:
        return env.mirrors["observations"]["policy"], env.mirrors["action"]
    finally:
        env.close()


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_a_mirror_averaged_export_is_the_policy_averaged_with_its_mirror(tmp_path, checkpoints, fmt, capsys):
    suffix = export_cli.SUFFIXES[fmt]
    plain, averaged = tmp_path / f"plain{suffix}", tmp_path / f"averaged{suffix}"
    checkpoint = str(checkpoints["flashsac"])
    assert export_cli.main(["--checkpoint", checkpoint, "--format", fmt, "--out", str(plain), "--verify-steps", "0"]) == 0
    # Verified (64 steps) against the torch policy averaged the same way: a comparison with the
    # plain torch policy would fail, as the two files below act differently.
    assert export_cli.main(["--checkpoint", checkpoint, "--format", fmt, "--out", str(averaged),
                            "--mirror-averaged"]) == 0
    assert "max abs difference" in capsys.readouterr().out
    assert read_metadata(averaged)["mirror_averaged"] is True and read_metadata(plain)["mirror_averaged"] is False

    from unilab_rl.symmetry import reflected

    observations, _ = _rollout(load_checkpoint(checkpoints["flashsac"]))
    obs_mirror, action_mirror = _policy_mirror()
    mirrored_observations = reflected(observations, obs_mirror)
    for path, symmetric in ((plain, False), (averaged, True)):
        # In the mirrored world the averaged policy takes exactly the mirrored action; the plain
        # policy (a few hundred env steps trained) does not.
        equivariant = torch.allclose(run_exported(path, mirrored_observations),
                                     reflected(run_exported(path, observations), action_mirror), atol=ONNX_TOLERANCE)
        assert equivariant == symmetric, path.name
    expected = 0.5 * (run_exported(plain, observations)
                      + reflected(run_exported(plain, mirrored_observations), action_mirror))
    torch.testing.assert_close(run_exported(averaged, observations), expected, rtol=0, atol=ONNX_TOLERANCE)


def test_mirror_averaged_export_of_a_task_without_a_mirror_is_bad_input(tmp_path, checkpoints, capsys, monkeypatch):
    from unilab.env import ManagerBasedRlEnv

    monkeypatch.setattr(ManagerBasedRlEnv, "_mirrors", lambda self: None)
    out = tmp_path / "policy.pt"
    assert export_cli.main(["--checkpoint", str(checkpoints["fastsac"]), "--format", "torchscript", "--out", str(out),
                            "--mirror-averaged"]) == export_cli.EXIT_BAD_INPUT
    assert f"--mirror-averaged: task {TASK!r} declares no left-right mirror" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_export_from_a_source_tree_not_installed_records_no_version(tmp_path, checkpoints, monkeypatch):
    import importlib.metadata

    installed = importlib.metadata.version

    def source_tree(name):
        if name == "unilab-rl":  # as when the packages run from PYTHONPATH, not pip-installed
            raise importlib.metadata.PackageNotFoundError(name)
        return installed(name)

    monkeypatch.setattr(importlib.metadata, "version", source_tree)
    out = tmp_path / "policy.pt"
    assert export_cli.main(["--checkpoint", str(checkpoints["fastsac"]), "--format", "torchscript", "--out", str(out),
                            "--verify-steps", "0"]) == 0
    assert read_metadata(out)["versions"] == {"unilab_rl": None, "torch": torch.__version__}
