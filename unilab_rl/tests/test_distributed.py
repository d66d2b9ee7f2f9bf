"""Two data-parallel ranks on CPU (gloo) through the real CLI path: learners stay identical
and only rank 0 writes a run directory."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp
from helpers import TINY

WORLD_SIZE = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rank_worker(rank: int, port: int, out: str, results: str) -> None:
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD_SIZE),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    import unilab_rl.runner
    from test_cli import TASKS, fake_factory
    from unilab_rl.cli import train as train_cli

    captured = {}
    original_train = unilab_rl.runner.OffPolicyRunner.train

    def train_and_capture(self, *args, **kwargs):
        result = original_train(self, *args, **kwargs)
        # Parameters, not buffers: BatchNorm running statistics are per-rank by design.
        captured["actor"] = {k: v.detach().clone() for k, v in self.agent.actor.named_parameters()}
        captured["critic"] = {k: v.detach().clone() for k, v in self.agent.critic.named_parameters()}
        captured["updates"] = self.updates
        return result

    unilab_rl.runner.OffPolicyRunner.train = train_and_capture
    tokens = [f"{k}={v}" for k, v in TINY["flashsac"].items()] + ["log_every=4"]
    argv = ["--task", "fake_task", "--backend", "fake", "--num-envs", "8", "--steps", "160", "--out", out,
            "--no-progress", "--no-tensorboard", *tokens]
    code = train_cli.main(argv, factory=fake_factory, tasks=TASKS)
    torch.save({"code": code, **captured}, os.path.join(results, f"rank{rank}.pt"))


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_two_ranks_keep_identical_learners_and_only_rank_zero_writes(tmp_path):
    out = tmp_path / "run"
    mp.spawn(rank_worker, args=(free_port(), str(out), str(tmp_path)), nprocs=WORLD_SIZE, join=True)
    first, second = (torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD_SIZE))
    assert first["code"] == second["code"] == 0
    assert first["updates"] == second["updates"] > 0
    for network in ("actor", "critic"):
        for key in first[network]:
            assert torch.equal(first[network][key], second[network][key]), f"{network}.{key} diverged"
    assert (out / "checkpoint.pt").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl"]
