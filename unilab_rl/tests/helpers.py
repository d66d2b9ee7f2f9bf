"""Shared pieces of the learner tests: tiny configurations (a second or two on CPU) and a
recorder standing in for the learner stream, which CI (no CUDA) cannot run."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from fake_env import PointMassEnv
from unilab_rl.algorithms import build_agent, build_config
from unilab_rl.contract import EnvSpec

TINY = {
    "flashsac": {"actor_width": 16, "critic_width": 16, "actor_blocks": 1, "critic_blocks": 1, "critic_bins": 21,
                 "batch_size": 32, "learning_starts": 64, "updates_per_step": 1.0, "replay_capacity_per_env": 64},
    "fastsac": {"actor_width": 32, "critic_width": 32, "atoms": 21, "batch_size": 32, "learning_starts": 64,
                "updates_per_step": 1.0, "replay_capacity_per_env": 64, "policy_period": 2},
}

# A left-right mirror that moves columns, as a G1's does (the fake env's keeps every column in
# place). Observations: [left knee, right knee, roll, forward velocity]; the reflection swaps the
# knees, negates the roll and keeps the forward velocity. Actions: [left hip, right hip, waist yaw].
# Each undoes itself, as the contract asks.
LEG_SWAP = (torch.tensor([1, 0, 2, 3]), torch.tensor([1.0, 1.0, -1.0, 1.0]))
ACTION_SWAP = (torch.tensor([1, 0, 2]), torch.tensor([1.0, 1.0, -1.0]))


def tiny_agent(algo: str, env: PointMassEnv | None = None, **overrides):
    env = env or PointMassEnv(num_envs=8)
    config = build_config(algo, {**TINY[algo], **overrides})
    return env, config, build_agent(algo, EnvSpec.from_env(env), config, torch.device("cpu"))


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def set_rank_environment(rank: int, world_size: int, port: int) -> None:
    import os

    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)


def capture_training(captured: dict) -> None:
    """In a rank process: record the learners' parameters (not buffers: BatchNorm running
    statistics are per rank by design), the update count and the last critic gradients."""
    import unilab_rl.runner

    runner_cls = unilab_rl.runner.OffPolicyRunner
    original_train, original_learn = runner_cls.train, runner_cls.learn

    def learn_and_capture(self, *args, **kwargs):
        result = original_learn(self, *args, **kwargs)
        grads = [p.grad.detach().clone() for p in self.agent.critic.parameters() if p.grad is not None]
        if grads:
            captured["last_critic_grads"] = grads
        return result

    def train_and_capture(self, *args, **kwargs):
        result = original_train(self, *args, **kwargs)
        captured["actor"] = {k: v.detach().clone() for k, v in self.agent.actor.named_parameters()}
        captured["critic"] = {k: v.detach().clone() for k, v in self.agent.critic.named_parameters()}
        captured["updates"] = self.updates
        return result

    runner_cls.learn = learn_and_capture
    runner_cls.train = train_and_capture


def train_as_rank(rank: int, port: int, results: str, train) -> None:
    """In a spawned rank of a 2-rank job: run ``train()`` (returns the CLI's exit code) with
    the learners captured, and save the record as rank{r}.pt in ``results``."""
    import os

    set_rank_environment(rank, 2, port)
    captured: dict = {}
    capture_training(captured)
    code = train()
    torch.save({"code": code, **captured}, os.path.join(results, f"rank{rank}.pt"))


def run_two_ranks(worker, out, results) -> tuple[dict, dict]:
    """Spawn ``worker(rank, port, out, results)`` as 2 gloo ranks; each saves rank{r}.pt in
    ``results``; return both records."""
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(free_port(), str(out), str(results)), nprocs=2, join=True)
    return tuple(torch.load(f"{results}/rank{r}.pt") for r in range(2))


def assert_ranks_trained_identically(first: dict, second: dict) -> None:
    """Both ranks finished, made the same number of updates and hold the same parameters."""
    assert first["code"] == second["code"] == 0
    assert first["updates"] == second["updates"] > 0
    for network in ("actor", "critic"):
        for key in first[network]:
            assert torch.equal(first[network][key], second[network][key]), f"{network}.{key} diverged"


class RecordingStream:
    """The LearnerStream calls, logged instead of ordered on a GPU."""

    def __init__(self, device: torch.device, log: list[str], env_priority: int) -> None:
        self.log, self.env_priority = log, env_priority
        self.inside = False

    @contextmanager
    def collecting(self):
        self.log.append("collect on env stream")
        yield
        self.log.append("caller waits for env stream")

    @contextmanager
    def updates(self):
        self.log.append("learner waits for env")
        self.inside = True
        yield
        self.inside = False
        self.log.append("updates recorded")

    def wait_for_updates(self) -> None:
        self.log.append("env waits for updates")

    def join(self) -> None:
        self.log.append("join")
