"""unisim_bench.backend: the raw side starts every sample from the start state, as the adapter
side does (warp's CPU device, two worlds; warp records and replays the raw graph there too)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("mujoco_warp")


def test_raw_samples_start_from_the_start_state_as_the_adapters_do(monkeypatch):
    # The adapter side is put back to the start state after every sample; the raw Data was
    # left where the previous samples took it (on the built-in model, fallen within a sample).
    import warp as wp
    from unisim.conformance import BUILTIN_MODEL
    from unisim_bench import backend as bench

    real = bench._raw_mjwarp
    raw_starts: list[float] = []

    def spied_raw(model, num_envs, device, substeps, key_qpos):
        step, keep_alive = real(model, num_envs, device, substeps, key_qpos)
        qpos, start = wp.to_torch(keep_alive[1].qpos), key_qpos.clone()

        def spied_step() -> None:
            raw_starts.append(float((qpos - start).abs().max()))
            step()

        return spied_step, keep_alive

    monkeypatch.setattr(bench, "_raw_mjwarp", spied_raw)
    iters, samples = 10, 3
    bench.bench_mjwarp(str(BUILTIN_MODEL), 2, torch.device("cpu"), 2, iters, samples, [0.5])
    # raw_starts[0] is the build's warm-up call; then ``iters`` calls per sample.
    firsts = [raw_starts[1 + k * iters] for k in range(samples)]
    assert len(raw_starts) == 1 + iters * samples
    assert raw_starts[1 + iters - 1] > 1e-3  # the robot moves within a sample: a restart is needed
    assert firsts == [0.0] * samples, f"raw samples started away from the start state: {firsts}"
