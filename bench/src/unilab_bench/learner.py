"""``unilab-bench learner``: where a learner's time per update goes, in a process built as
``unilab-bench collector`` builds it (same preset, overrides, env and replay).

Per call, streamed (``--calls`` back to back, one synchronize at the end), over ``--samples``
interleaved samples:
- ``draw``: one replay draw of a batch, as the runner's learning phase issues it;
- ``update``: one gradient update of the agent on a fixed batch (replayed from CUDA graphs
  where the learner uses them);
- ``draw_and_update``: both, one after the other (a draw per update);
- ``step_of_updates``: an env step's updates as the runner's learning phase runs them, one
  draw for all of them (``ReplayBuffer.sample_batches``), then the updates; per update.
"issue" is the host's time until the last call returned; "wall" adds the synchronize. Where
they are close, the host's launching is the limit; where wall is longer, the device is.

Then, per call of an eager update (a copy of the learner with ``cuda_graph=false``) and of a
draw: on CUDA the device events the torch profiler saw (kernels, copies, memsets), their
device time and the kernels that took the most of it (``heaviest_kernels``, by name), then the
kernel-sized ops and host syncs torch dispatches (``unisim.host_sync``).
Compiled networks launch fused kernels, so for them the profiler's count is the one to read.
On the host the optimizers read their step counts back each step, which the probe counts as
host syncs; the CUDA learners keep them on the device.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import torch
from unilab_rl.algo_config import OffPolicyConfig
from unilab_rl.algorithms import build_agent
from unilab_rl.cli.run_record import git_commit
from unilab_rl.graphed_updates import uses_cuda_graphs
from unilab_rl.runner import OffPolicyRunner

from unilab_bench.stats import summarize, synchronize

# Updates per eager count: a whole number of actor periods for every learner here (FastSAC 4,
# FlashSAC 2), so the actor's share is what training runs.
EAGER_UPDATES = 8
HEAVIEST_KERNELS = 12  # the kernel names listed with their device time per call


def bench_learner(args: argparse.Namespace, runner: OffPolicyRunner, config: OffPolicyConfig) -> dict[str, Any]:
    """Times and counts for the learner of ``runner`` (whose replay holds at least one batch)."""
    device = runner.spec.device
    agent, replay, batch_size = runner.agent, runner.replay, config.batch_size
    batch = replay.sample(batch_size)
    for _ in range(2 * EAGER_UPDATES):  # compiles, captures every update variant
        agent.update(batch)
    per_step = updates_per_env_step(config)

    def step_of_updates() -> None:
        for drawn in replay.sample_batches(batch_size, per_step):
            agent.update(drawn)

    calls: dict[str, Callable[[], object]] = {
        "draw": lambda: replay.sample(batch_size),
        "update": lambda: agent.update(batch),
        "draw_and_update": lambda: agent.update(replay.sample(batch_size)),
        "step_of_updates": step_of_updates,
    }
    updates_per_call = {name: per_step if name == "step_of_updates" else 1 for name in calls}
    issue: dict[str, list[float]] = {name: [] for name in calls}
    wall: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.samples):
        for name, call in calls.items():
            issued, finished = _streamed_ms(call, args.calls, device)
            issue[name].append(issued / updates_per_call[name])
            wall[name].append(finished / updates_per_call[name])

    eager = build_agent(args.algo, runner.spec, config.model_copy(update={"cuda_graph": False}), device)
    eager.load_state_dict(agent.state_dict())
    for _ in range(EAGER_UPDATES):  # compiles the eager learner's networks
        eager.update(batch)
    counted = {"eager_update": _counted(lambda: eager.update(batch), device),
               "draw": _counted(lambda: replay.sample(batch_size), device),
               "draw_per_update_in_one_step": _counted(lambda: replay.sample_batches(batch_size, per_step), device,
                                                       per_call=per_step)}
    return {
        "benchmark": "learner", "command": " ".join(sys.argv), "task": args.task, "backend": args.backend,
        "algo": args.algo, "num_envs": args.num_envs, "device": str(device), "batch_size": batch_size,
        "updates_from_cuda_graphs": uses_cuda_graphs(config.cuda_graph, device), "calls_per_sample": args.calls,
        "samples": args.samples, "updates_per_env_step": per_step, "algo_config": config.model_dump(),
        "ms_per_call": {name: {"issue": summarize(issue[name]), "wall": summarize(wall[name])} for name in calls},
        "per_call_dispatch": counted, "eager_updates_counted": EAGER_UPDATES,
        "git_commit": git_commit(), "versions": {"torch": torch.__version__},
        "raw": {"issue_ms": issue, "wall_ms": wall},
    }


def print_learner_record(record: dict[str, Any]) -> None:
    for name, times in record["ms_per_call"].items():
        print(f"{name:16s} ms per call  issue {times['issue']['median']:8.3f}  wall {times['wall']['median']:8.3f}"
              f"  (wall min {times['wall']['min']:.3f} max {times['wall']['max']:.3f})")
    for name, counts in record["per_call_dispatch"].items():
        line = f"{name:16s} kernel ops {counts['kernel_ops']:7.1f}  host syncs {counts['host_syncs']:4.1f}"
        if counts["device_ms"] is not None:
            line += f"  profiled device events {counts['device_events']:7.1f}  device ms {counts['device_ms']:.3f}"
        print(line)
    heaviest = record["per_call_dispatch"]["eager_update"]["heaviest_kernels"]
    if heaviest:
        print("eager_update's heaviest kernels (device ms per update, launches per update, name):")
        for kernel in heaviest:
            print(f"  {kernel['device_ms']:7.3f}  {kernel['events']:5.1f}  {kernel['name'][:100]}")


def heaviest_kernels(kernels: Iterable[tuple[str, float]], calls: int,
                     count: int = HEAVIEST_KERNELS) -> list[dict[str, Any]]:
    """The ``count`` kernel names with the most device time in ``kernels`` ((name, device
    microseconds) per launch), most first, with their launches and milliseconds per call."""
    launches: Counter[str] = Counter()
    device_us: Counter[str] = Counter()
    for name, us in kernels:
        launches[name] += 1
        device_us[name] += us
    return [{"name": name, "events": launches[name] / calls, "device_ms": us / 1e3 / calls}
            for name, us in device_us.most_common(count)]


def updates_per_env_step(config: OffPolicyConfig) -> int:
    """The updates the runner draws together in one env step (at least one; a fractional
    ``updates_per_step`` alternates between its floor and its ceiling)."""
    return max(1, int(config.updates_per_step))


def _streamed_ms(call: Callable[[], object], count: int, device: torch.device) -> tuple[float, float]:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(count):
        call()
    issued = time.perf_counter() - start
    synchronize(device)
    finished = time.perf_counter() - start
    return 1e3 * issued / count, 1e3 * finished / count


def _counted(call: Callable[[], object], device: torch.device, per_call: int = 1) -> dict[str, Any]:
    """Kernel-sized ops and host syncs per call, from what torch dispatches; on CUDA also the
    device events the torch profiler saw and their device time. Divided by ``per_call`` for a
    call that does the work of that many (a draw for several updates: per update).

    The profile runs first: torch.compile'd code that once runs under a dispatch mode (the
    probe is one) runs eagerly from then on, for the rest of the process (seen with torch
    2.13), so a profile taken after the probe would time an uncompiled learner."""
    from unisim.host_sync import HostSyncProbe

    counts: dict[str, Any] = {"device_events": None, "device_ms": None, "heaviest_kernels": None}
    if device.type == "cuda":
        from torch.profiler import ProfilerActivity, profile

        synchronize(device)
        with profile(activities=[ProfilerActivity.CUDA]) as profiled:
            for _ in range(EAGER_UPDATES):
                call()
            synchronize(device)
        kernels = [e for e in profiled.events()
                   if e.device_type.name == "CUDA" and not e.is_user_annotation]
        counts["device_events"] = len(kernels) / EAGER_UPDATES / per_call
        counts["device_ms"] = sum(e.device_time for e in kernels) / 1e3 / EAGER_UPDATES / per_call
        counts["heaviest_kernels"] = heaviest_kernels(((e.name, e.device_time) for e in kernels),
                                                      EAGER_UPDATES * per_call)
    with HostSyncProbe() as probe:
        for _ in range(EAGER_UPDATES):
            call()
    calls = EAGER_UPDATES * per_call
    return {"kernel_ops": probe.kernel_op_count / calls, "host_syncs": len(probe.syncs) / calls, **counts}
