"""unisim_bench.backend: every row (raw, adapter validated, adapter in hot-loop mode) starts
every sample from the start state (warp's CPU device, two worlds; warp records and replays the
raw graph there too)."""

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


def test_each_adapter_row_starts_from_the_start_state(monkeypatch):
    # The hot-loop row used to go on from where the validated row stopped: on an H200 it timed a
    # G1 at rest (one solver iteration) and read 1.41x raw physics, which timed the first steps.
    import unisim
    from unisim.conformance import BUILTIN_MODEL
    from unisim_bench import backend as bench

    built: list[unisim.SimBackend] = []
    real_create, real_timed = unisim.create_backend, bench._timed

    def spied_create(*args, **kwargs):
        built.append(real_create(*args, **kwargs))
        return built[-1]

    row_starts: list[tuple[bool, float]] = []

    def spied_timed(fn, iters, device):
        if fn.__name__ == "adapter_step":
            backend = built[0]
            start = bench._start_state(backend)[0]
            row_starts.append((backend.validate, float((backend.views().qpos - start).abs().max())))
        return real_timed(fn, iters, device)

    monkeypatch.setattr(bench.unisim, "create_backend", spied_create)
    monkeypatch.setattr(bench, "_timed", spied_timed)
    samples = 3
    bench.bench_mjwarp(str(BUILTIN_MODEL), 2, torch.device("cpu"), 2, 10, samples, [0.5])
    assert [validate for validate, _ in row_starts] == [True, False] * samples
    assert [distance for _, distance in row_starts] == [0.0] * (2 * samples), row_starts



def test_each_genesis_sample_starts_from_the_start_state(monkeypatch):
    # The Genesis row went on from where the previous sample stopped: its later samples timed a
    # robot that had run through the earlier ones (fallen or at rest), not the same steps. Run
    # here on the mujoco adapter (Genesis is not installed everywhere); the bench uses only the
    # backend contract.
    import unisim
    from unisim.conformance import BUILTIN_MODEL
    from unisim_bench import backend as bench

    built: list[unisim.SimBackend] = []
    real_create, real_timed = unisim.create_backend, bench._timed

    def as_mujoco(name, **kwargs):
        assert name == "genesis"
        kwargs.pop("device")
        built.append(real_create("mujoco", **kwargs))
        return built[-1]

    starts: list[float] = []  # distance from the start state at the start and end of each step sample
    ends: list[float] = []

    def spied_timed(fn, iters, device):
        if not fn.__qualname__.startswith("bench_genesis."):  # set_state's calls, not the step row
            return real_timed(fn, iters, device)
        backend = built[0]
        start = bench._start_state(backend)[0]
        starts.append(float((backend.views().qpos - start).abs().max()))
        seconds = real_timed(fn, iters, device)
        ends.append(float((backend.views().qpos - start).abs().max()))
        return seconds

    monkeypatch.setattr(bench.unisim, "create_backend", as_mujoco)
    monkeypatch.setattr(bench, "_timed", spied_timed)
    samples = 3
    bench.bench_genesis(str(BUILTIN_MODEL), 2, torch.device("cpu"), 2, 10, samples, [0.5])
    assert len(starts) == samples
    assert ends[0] > 1e-3  # the robot moves within a sample: a restart is needed
    assert starts == [0.0] * samples, f"Genesis samples started away from the start state: {starts}"
