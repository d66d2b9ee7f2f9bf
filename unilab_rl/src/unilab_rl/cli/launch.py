"""``unilab-train --nproc N``: the same command re-run as N torchrun ranks, one per GPU, with
signals passed on so that every rank stops on the same step."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from unilab_rl.cli.stopping import STOP_SIGNALS

# NVLink multicast stays off on shared machines (never create multicast objects).
TORCHRUN_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def launch_torchrun(nproc: int, argv: list[str]) -> int:
    """Re-run this command as ``nproc`` torchrun ranks (argv without --nproc, ``without_flags``); their exit code.
    The caller refuses --nproc inside a rank."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
               "-m", "unilab_rl.cli.train", *argv]
    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in TORCHRUN_ENV.items()}}
    # torchrun runs in its own session, so Ctrl-C (or a scheduler's SIGTERM to this job)
    # reaches this launcher only; the launcher passes the signal to the ranks, which stop on
    # the same iteration (rank 0 saves) and exit 0, and reports it as 130 (SIGINT) or 143
    # (SIGTERM). torchrun itself never sees the signal: it would report the ranks as failed.
    process = subprocess.Popen(command, env=env, start_new_session=True)
    received: list[int] = []

    def pass_to_ranks(signum: int, _frame: Any) -> None:
        received.append(signum)
        for pid in child_pids(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {sig: signal.signal(sig, pass_to_ranks) for sig in STOP_SIGNALS}
    try:
        code = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 + received[0] if received and code == 0 else code


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc): torchrun's rank processes."""
    pids = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            pids += [int(token) for token in children.read_text().split()]
    return pids


def without_flags(argv: list[str], flags: tuple[str, ...]) -> list[str]:
    """``argv`` without ``flags`` and their values (``--flag VALUE`` or ``--flag=VALUE``): what a
    rank (without ``--nproc``) or a seed's process (``--seeds``) is given of the command."""
    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in flags:
            skip = True
        elif not token.startswith(tuple(f"{flag}=" for flag in flags)):
            kept.append(token)
    return kept
