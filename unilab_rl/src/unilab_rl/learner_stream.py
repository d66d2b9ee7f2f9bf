"""Learning beside collection: the learner's updates on a CUDA stream of their own.

Sequential collection issues env step t, then the updates step t earned, then env step t+1,
all on one stream, so the GPU runs one of them at a time although a 4096-env physics step
leaves much of a large GPU idle. With the updates on their own stream, those of step t run
while env step t+1 runs.

The price is a policy one update round stale: the collector computes the action of step t+1
at the end of step t, before step t's updates (sequential collection computes it after
them). Everything the two streams share keeps a fixed order:
- the learner stream waits for the env stream where the updates are issued, so they read
  step t's transition and the normalizer statistics that observing step t wrote;
- the env stream waits for the updates before the agent observes step t+1 and acts for step
  t+2 (``wait_for_updates``), so the agent's weights and statistics are never read on one
  stream while the other writes them;
- while step t+1 writes its replay slot, step t's updates sample around it
  (``ReplayBuffer.sample(exclude_next_write=True)``);
- whatever reads the learner's results on the host (loss sums, checkpoints) joins first.

Both streams compete for the GPU's multiprocessors; profiled at 4096 envs, they mostly took
turns rather than ran side by side. With a negative ``env_priority`` the collection (env step,
replay insert, acting) runs on a stream of that higher priority, and where kernels of both
wait for a multiprocessor the env's go first: the env step is a chain of small kernels, each
waiting on the one before, that the next iteration waits on, while the updates' kernels can
fill the gaps between them. Leaving the env multiprocessors of its own instead (the learner's
stream in a CUDA green context of most of the GPU's) was slower: the env's chain of small
kernels cannot use a share of the GPU it keeps idle between them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


class LearnerStream:
    def __init__(self, device: torch.device, env_priority: int) -> None:
        if device.type != "cuda":
            raise ValueError(f"overlap_learning=true needs a CUDA device, got {device}: on the host the env "
                             "and the learner share the same cores, so there is nothing to overlap; "
                             "pass overlap_learning=false")
        self.device = device
        self.stream = torch.cuda.Stream(device)
        # torch clamps a priority past the device's range to its highest
        self.env_stream = torch.cuda.Stream(device, priority=env_priority) if env_priority < 0 else None
        self.updates_done = torch.cuda.Event()
        self.recorded = False

    @contextmanager
    def collecting(self) -> Iterator[None]:
        """Issue the body (an env step and its updates) on the env stream, ordered after the
        caller's stream and before whatever the caller issues next; without an env priority,
        on the caller's stream itself."""
        if self.env_stream is None:
            yield
            return
        caller = torch.cuda.current_stream(self.device)
        self.env_stream.wait_stream(caller)
        with torch.cuda.stream(self.env_stream):
            yield
        caller.wait_stream(self.env_stream)

    @contextmanager
    def updates(self) -> Iterator[None]:
        """Run the body (the gradient updates) on the learner stream, after the env stream's
        work issued so far."""
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.stream):
            yield
        self.updates_done.record(self.stream)
        self.recorded = True

    def wait_for_updates(self) -> None:
        """Make the env stream wait for the updates issued last (before the agent is touched)."""
        if self.recorded:
            torch.cuda.current_stream(self.device).wait_event(self.updates_done)

    def join(self) -> None:
        """Make the current stream wait for everything issued on the learner stream."""
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
