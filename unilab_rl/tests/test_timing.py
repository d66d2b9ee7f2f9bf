"""The phase timer: which steps it times, and on CUDA, that it times the stream a phase runs
on without synchronizing inside the step."""

from types import SimpleNamespace

import pytest
import torch
from unilab_rl.timing import SampledPhaseTimer

from unilab_rl import timing


def test_only_every_nth_step_is_timed_and_flush_starts_over(monkeypatch):
    # A clock that moves only when a phase "works": step k's work takes k+1 ms.
    now = [0.0]
    monkeypatch.setattr(timing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    timer = SampledPhaseTimer(torch.device("cpu"), sample_every=3)
    for step in range(7):  # sampled: steps 0, 3 and 6
        with timer.phase("work"):
            now[0] += (step + 1) * 1e-3
        timer.advance()
    assert timer.counts["work"] == 3
    assert timer.flush()["work_ms"] == pytest.approx((1 + 4 + 7) / 3)  # the mean of the sampled steps
    assert timer.flush() == {}


def test_a_phase_that_raises_is_still_timed_on_the_cpu():
    timer = SampledPhaseTimer(torch.device("cpu"), sample_every=1)
    with pytest.raises(RuntimeError), timer.phase("failing"):
        raise RuntimeError("boom")
    assert set(timer.flush()) == {"failing_ms"}


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA events need a GPU (device machine)")


@needs_cuda
def test_on_cuda_a_phase_is_timed_on_its_stream_without_a_sync(monkeypatch):
    device = torch.device("cuda")
    side = torch.cuda.Stream(device)
    timer = SampledPhaseTimer(device, sample_every=1)
    # Nothing inside a step may wait for the device: the host returns while the GPU sleeps.
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: pytest.fail("synchronized inside a phase"))
    with torch.cuda.stream(side), timer.phase("busy"):
        torch.cuda._sleep(50_000_000)  # tens of ms of GPU time on the side stream
    with timer.phase("idle"):  # the default stream is free meanwhile
        pass
    assert len(timer.pending) == 2
    monkeypatch.undo()
    means = timer.flush()
    assert means["busy_ms"] > 1.0 and means["idle_ms"] < means["busy_ms"] / 10
    assert timer.pending == []
