"""What one env step dispatches: torch ops (about one GPU kernel launch each), host syncs by
two counts (the aten ops dispatched, on any device; torch's CUDA sync debug mode), Python calls."""

from __future__ import annotations

import cProfile
import pstats
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from unisim import DataPlane
from unisim.host_sync import HostSyncProbe


@contextmanager
def _probing(backend) -> Iterator[HostSyncProbe]:
    """A dispatch probe over a stepping loop. On a HOST_BRIDGE backend the backend's own calls
    are left out (they sync by design); on a DEVICE backend the whole step counts."""
    ignored = ("step", "set_state_where") if _host_bridge(backend) else ()
    with HostSyncProbe() as probe, probe.ignoring(backend, *ignored):
        yield probe


def _host_bridge(backend) -> bool:
    return backend.capabilities.data_plane is DataPlane.HOST_BRIDGE


def _counts(probe: HostSyncProbe, steps: int, backend) -> dict[str, float]:
    return {"aten_ops_per_step": probe.op_count / steps, "kernel_ops_per_step": probe.kernel_op_count / steps,
            "host_syncs_per_step": len(probe.syncs) / steps, "backend_calls_left_out": float(_host_bridge(backend))}


def dispatch_profile(env, action, steps: int = 10) -> dict[str, float]:
    """Per env step: aten ops, and compute ops without views (on a GPU each is about one
    kernel launch, the number fusing reduces; warp kernels inside the backend are not torch
    ops and are not counted), and host syncs (``_probing``). Works on any device
    (unisim.host_sync)."""
    with _probing(env.backend) as probe:
        for _ in range(steps):
            env.step(action)
    return _counts(probe, steps, env.backend)


class _PhaseOpCounter:
    """Stands in for the env's step phase timer: counts the kernel ops each named phase
    dispatches (phases nest as the timer's do: ``step_total_ms`` holds the others)."""

    def __init__(self, probe: HostSyncProbe) -> None:
        self.probe = probe
        self.totals: Counter[str] = Counter()
        self.open: dict[str, int] = {}

    def start(self, name: str) -> None:
        self.open[name] = self.probe.kernel_op_count

    def stop(self, name: str) -> None:
        self.totals[name.removesuffix("_ms")] += self.probe.kernel_op_count - self.open.pop(name)

    def tick(self) -> None:
        pass


def kernel_ops_by_phase(env, action, steps: int = 10) -> dict[str, float]:
    """Kernel ops per env step in each phase of the env's step timer (where the step's ops
    are: terminations, rewards and commands sit in ``update_state``), counted like
    ``dispatch_profile``. The env's own timer is put back afterwards."""
    timer = env.timer
    with _probing(env.backend) as probe:
        counter = env.timer = _PhaseOpCounter(probe)
        try:
            for _ in range(steps):
                env.step(action)
        finally:
            env.timer = timer
    return {name: count / steps for name, count in counter.totals.items()}


def reference_profile(ref, action, steps: int = 10) -> dict[str, float]:
    """The reference loop's dispatch counts per step, counted as ``dispatch_profile`` counts
    the env's (a HOST_BRIDGE backend's own calls left out), and cProfile calls per step."""
    with _probing(ref.backend) as probe:
        for _ in range(steps):
            ref.step(action)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        ref.step(action)
    profiler.disable()
    return {**_counts(probe, steps, ref.backend), "python_calls_per_step": pstats.Stats(profiler).total_calls / steps}


def reward_kernel_ops(env) -> int:
    with HostSyncProbe() as probe:
        env.reward_manager.compute(env)
    return probe.kernel_op_count


# What c10 warns on each synchronizing CUDA call in sync-debug "warn" mode. Match it exactly:
# setting the mode also warns, once per process, that "Synchronization debug mode is a
# prototype feature and does not yet detect all synchronizing operations", which is no sync
# (an earlier "synchroniz" match counted it as 0.1 syncs per probed step).
SYNC_WARNING = "called a synchronizing CUDA operation"


def is_sync_warning(message: str) -> bool:
    return SYNC_WARNING in message


def host_syncs_per_step(env, action, steps: int = 20) -> tuple[float | None, dict[str, int], list[int]]:
    """torch-visible host syncs per env step (CUDA only: torch's sync debug mode warns on
    each), where they came from (the innermost caller outside torch, then the torch line that
    warned, with a count) and at which of the ``steps`` steps. Expected: 0 on a
    DEVICE_MASKED_RESET backend."""
    if env.device.type != "cuda":
        return None, {}, []
    import warnings

    sites: Counter[str] = Counter()
    at_steps: list[int] = []
    step = 0

    def record(message, category, filename, lineno, file=None, line=None) -> None:
        if is_sync_warning(str(message)):
            sites[f"{sync_caller(traceback.extract_stack())} via {filename}:{lineno}"] += 1
            at_steps.append(step)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record  # called inside the warning, so the caller's stack is live
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for step in range(steps):  # noqa: B007 (record() reads it)
                env.step(action)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return len(at_steps) / steps, dict(sites), at_steps


def sync_caller(stack: list[traceback.FrameSummary]) -> str:
    """The innermost frame of ``stack`` outside torch and the warnings machinery, as
    file:line (function): the code that asked torch for the sync."""
    for frame in reversed(stack):
        path = frame.filename.replace("\\", "/")
        if "/torch/" in path or path.endswith("warnings.py") or frame.name == "record":
            continue
        return f"{frame.filename}:{frame.lineno} ({frame.name})"
    return "unknown caller"
