"""The learner's torch thread count, shared by every command that runs a policy."""

from __future__ import annotations

import torch


def apply_thread_policy(device: torch.device, threads: int | None) -> None:
    """On a CPU env the simulator's own threads do the physics; a multi-threaded learner
    competing with them (and with anything else on a small box) slowed updates 15x in our
    measurements, so the learner gets one intra-op thread unless told otherwise."""
    if threads is not None:
        torch.set_num_threads(threads)
    elif device.type == "cpu":
        torch.set_num_threads(1)
