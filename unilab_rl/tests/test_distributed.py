"""Two data-parallel ranks on CPU (gloo) through the real CLI path: learners stay identical
and only rank 0 writes a run directory."""


import pytest
import torch
from helpers import TINY, assert_ranks_trained_identically, run_two_ranks, train_as_rank


def rank_worker(rank: int, port: int, out: str, results: str) -> None:
    def train() -> int:
        from test_cli import TASKS, fake_factory
        from unilab_rl.cli import train as train_cli

        tokens = [f"{k}={v}" for k, v in TINY["flashsac"].items()] + ["log_every=4"]
        argv = ["--task", "fake_task", "--backend", "fake", "--num-envs", "8", "--steps", "160", "--out", out,
                "--no-progress", "--no-tensorboard", *tokens]
        return train_cli.main(argv, factory=fake_factory, tasks=TASKS)

    train_as_rank(rank, port, results, train)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_two_ranks_keep_identical_learners_and_only_rank_zero_writes(tmp_path):
    out = tmp_path / "run"
    first, second = run_two_ranks(rank_worker, out, tmp_path)
    assert_ranks_trained_identically(first, second)
    assert (out / "checkpoint.pt").is_file()
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl"]
