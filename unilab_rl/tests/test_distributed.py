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
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl", "run.json", "summary.json"]


def consensus_worker(rank: int, port: int, out: str, results: str) -> None:
    from helpers import set_rank_environment

    from unilab_rl import distributed

    set_rank_environment(rank, 2, port)
    torch.distributed.init_process_group("gloo", rank=rank, world_size=2)
    hook = distributed.stop_consensus(torch.device("cpu"), every=5)
    # Rank 1 alone wants to stop from its 3rd call on (say its time budget ran out).
    answers = [hook(rank == 1 and call >= 3) for call in range(1, 13)]
    torch.distributed.destroy_process_group()
    torch.save({"answers": answers}, f"{results}/rank{rank}.pt")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_ranks_agree_to_stop_at_the_next_check_after_any_rank_wants_to(tmp_path):
    first, second = run_two_ranks(consensus_worker, tmp_path / "unused", tmp_path)
    expected = [False] * 4 + [True] + [False] * 4 + [True] + [False, False]
    assert first["answers"] == second["answers"] == expected


def test_a_stop_check_period_below_one_is_refused():
    from unilab_rl import distributed

    with pytest.raises(ValueError, match="every must be >= 1"):
        distributed.stop_consensus(torch.device("cpu"), every=0)


def teardown_worker(rank: int, port: int, out: str, results: str) -> None:
    import os
    import sys

    from helpers import set_rank_environment, tiny_agent

    from unilab_rl import distributed

    set_rank_environment(rank, 2, port)
    dynamo_before_start = "torch._dynamo" in sys.modules
    distributed.start(distributed.rank_from_environment(), torch.device("cpu"))
    tiny_agent("flashsac")  # what a rank builds after joining the group (its optimizers import dynamo)
    distributed.finish_together()

    def threads() -> list[str]:
        return sorted(open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task"))

    before = threads()
    distributed.stop()
    torch.save({"dynamo_before_start": dynamo_before_start, "dynamo_after": "torch._dynamo" in sys.modules,
                "threads_before_stop": before, "threads_after_stop": threads()}, f"{results}/rank{rank}.pt")


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_stopping_frees_the_process_group_so_no_gloo_thread_runs_into_interpreter_exit(tmp_path):
    first, second = run_two_ranks(teardown_worker, tmp_path / "unused", tmp_path)
    for record in (first, second):
        # Meaningful only where the learner's imports come after the group, as in unilab-train.
        assert not record["dynamo_before_start"] and record["dynamo_after"]
        # The group's threads are named after gloo: seen before the stop, gone after it.
        assert [name for name in record["threads_before_stop"] if "gloo" in name], record["threads_before_stop"]
        assert not [name for name in record["threads_after_stop"] if "gloo" in name], record["threads_after_stop"]


def test_after_a_resume_each_rank_but_the_main_one_draws_a_stream_of_its_own():
    from unilab_rl.cli.train import reseed_other_ranks
    from unilab_rl.distributed import RankInfo

    def draws_after_resume(rank):
        torch.manual_seed(123)  # the main rank's state, which restore() puts on every rank
        reseed_other_ranks(rank, seed=7, env_steps=4096)
        return torch.rand(4)

    main, first, second = (draws_after_resume(RankInfo(r, 3, r)) for r in range(3))
    torch.manual_seed(123)
    assert torch.equal(main, torch.rand(4))  # the main rank continues the checkpoint's stream
    assert not torch.equal(first, main) and not torch.equal(second, main) and not torch.equal(first, second)
    assert torch.equal(first, draws_after_resume(RankInfo(1, 3, 1)))  # reproducible
    assert draws_after_resume(None).equal(main)  # a single-process run is untouched
