"""Data-parallel training on the real g1_walk_flat env (mujoco backend), 2 CPU ranks over gloo."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import TINY, assert_ranks_trained_identically, run_two_ranks, train_as_rank

ARGV = ["--task", "g1_walk_flat", "--backend", "mujoco", "--algo", "flashsac", "--num-envs", "4",
        "--steps", "320", "--no-progress", "--no-tensorboard",
        *[f"{k}={v}" for k, v in TINY["flashsac"].items()], "log_every=8"]


def rank_worker(rank: int, port: int, out: str, results: str) -> None:
    def train() -> int:
        from unilab_rl.cli import train as train_cli

        # A snapshot by env steps (each rank counts its own 4 envs): only rank 0 writes it.
        return train_cli.main([*ARGV, "runner.snapshot_at_steps=160", "--out", out])

    train_as_rank(rank, port, results, train)


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_two_mujoco_ranks_average_gradients_and_stay_identical(tmp_path):
    out = tmp_path / "run"
    first, second = run_two_ranks(rank_worker, out, tmp_path)
    assert_ranks_trained_identically(first, second)
    # Different seeds per rank collect different data, yet the applied gradients are the average.
    for a, b in zip(first["last_critic_grads"], second["last_critic_grads"], strict=True):
        assert torch.equal(a, b)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-160steps.pt", "checkpoint.pt", "metrics.jsonl",
                                                     "run.json", "summary.json"]


def test_nproc_launches_torchrun_ranks_and_rank_zero_alone_writes(tmp_path):
    out = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "unilab_rl.cli.train", "--nproc", "2", *ARGV, "--out", str(out)],
                            capture_output=True, text=True, timeout=600, check=False)
    # torchrun's own report fills the tail of stderr; the failing rank's message is earlier.
    rank_errors = [line for line in result.stderr.splitlines() if "terminate" in line or "what()" in line]
    assert result.returncode == 0, "\n".join(rank_errors) + result.stdout[-2000:] + result.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl", "run.json", "summary.json"]


def test_nproc_with_bad_input_fails_before_launching(tmp_path):
    result = subprocess.run([sys.executable, "-m", "unilab_rl.cli.train", "--nproc", "2", "--task", "no_such_task",
                             "--out", str(tmp_path / "run")], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 2 and "unknown task" in result.stderr
    assert not (tmp_path / "run").exists()


def _launch_until_logging(out: Path, *extra: str) -> subprocess.Popen:
    """Start ``unilab-train --nproc 2`` for far more steps than the test waits for; return
    once rank 0 has written its first metrics record (both ranks are past the learner
    broadcast, so both handle SIGINT and SIGTERM)."""
    argv = [a if a != "320" else "10000000" for a in ARGV]
    process = subprocess.Popen([sys.executable, "-m", "unilab_rl.cli.train", "--nproc", "2", *argv, *extra,
                                "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    return process


def test_ctrl_c_stops_every_rank_and_rank_zero_saves(tmp_path):
    out = tmp_path / "run"
    process = _launch_until_logging(out)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)  # what a terminal's Ctrl-C delivers to the launcher
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stdout[-2000:] + stderr[-3000:]
    assert "interrupted" in stdout and "Traceback" not in stderr, stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl", "run.json", "summary.json"]


def test_a_failing_rank_ends_the_whole_job_without_a_hang(tmp_path):
    out = tmp_path / "run"
    # A directory where rank 0's checkpoint must go: its first save (after 4 steps) fails,
    # deterministically, while rank 1 is in the next collective. torchrun must stop rank 1 too.
    (out / "checkpoint.pt").mkdir(parents=True)
    (out / "checkpoint.pt" / "keep").write_text("not a checkpoint")
    argv = [a if a != "320" else "10000000" for a in ARGV]
    result = subprocess.run([sys.executable, "-m", "unilab_rl.cli.train", "--nproc", "2", *argv,
                             "checkpoint_every=4", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode not in (0, 130), result.stdout[-2000:] + result.stderr[-3000:]
    assert "IsADirectoryError" in result.stderr or "Is a directory" in result.stderr, result.stderr[-3000:]
    assert "local_rank: 0" in result.stderr  # rank 0 is reported as the root cause


def test_sigterm_to_the_launcher_saves_like_ctrl_c_and_leaves_no_rank_running(tmp_path):
    out = tmp_path / "run"
    process = _launch_until_logging(out)
    process.send_signal(signal.SIGTERM)  # e.g. a job scheduler preempting the run
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, stdout[-2000:] + stderr[-3000:]
    assert "termination request received" in stderr and "Traceback" not in stderr, stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint.pt", "metrics.jsonl", "run.json", "summary.json"]
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(str(out)) == []


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                pids.append(int(cmdline.parent.name))
        except OSError:
            continue
    return pids


def test_a_rank_dying_in_native_code_prints_its_python_stack_before_torchruns_report(tmp_path):
    from unilab_rl.cli.launch import child_pids

    out = tmp_path / "run"
    process = _launch_until_logging(out)
    (torchrun,) = child_pids(process.pid)
    ranks = child_pids(torchrun)
    assert len(ranks) == 2
    os.kill(max(ranks), signal.SIGABRT)  # what a C++ std::terminate in the rank raises
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode not in (0, 130, 143), stdout[-2000:] + stderr[-3000:]
    assert "Fatal Python error: Aborted" in stderr and "most recent call first" in stderr, stderr[-3000:]
