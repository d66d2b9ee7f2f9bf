"""The env step's manager phases, replayed from CUDA graphs (``EnvCfg.cuda_graph``).

Why: a step dispatches 217 (walking) to 303 (tracking) small kernels from Python (counted on
mujoco CPU): terminations, rewards, commands, the reset transaction, observations. On a GPU each is a launch of a few microseconds, a
cost that has nothing to do with the work. Replayed from graphs they are three launches.

What runs how, in the order of the eager step:
- eager: the action check and processing, the backend's step;
- graph 1, the update phase: sensors, episode lengths, terminations, rewards, the commands'
  metrics and advance, interval timers, the final observations;
- eager: the curriculum, which decides on the host step counter;
- graph 2, the reset transaction up to the full-size state it writes;
- eager: the backend's ``set_state_where`` (its own kernels and graphs);
- graph 3: the commands' refresh, observations, metric accumulation.

Why this is the same step: every state a manager or term carries between steps is updated
in place (``tests/test_carried_state.py``), so it lives at the fixed addresses a graph reads
and writes; the backend's views are fixed tensors too (a device data plane with immediate
reset publication, checked here); the env's generator is registered with each graph, so a
replay draws what an eager step would; host counters (the step count, the metrics' step
count) advance outside the graphs. A term whose Python changes what a step does (an
evaluation hook) calls ``env.invalidate_step_graphs()`` and the graphs are captured again.

The first ``warmup`` steps run eagerly (library workspaces and lazy state must exist before a
capture); the next one captures the three graphs and then performs the step by replaying
them. A graph's outputs are overwritten by its next replay, so a step returns copies.

Preconditions, each refused at construction naming the setting: a CUDA device; a backend
with a device data plane and immediate reset publication; no recorders (their ring position
is on the host); ``profile_phases`` off (its timings are host-driven).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from unisim import DataPlane, ResetPublication


class CudaGraphRuntime:
    """Captures and replays on one side stream, so that the library workspaces a capture
    needs (cuBLAS for the observations' small matmuls) exist from the eager warm-up on it."""

    def __init__(self, env) -> None:
        self.env = env
        self.stream = torch.cuda.Stream(env.device)

    def eager(self, work: Callable[[], Any]) -> Any:
        current = torch.cuda.current_stream(self.env.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            out = work()
        current.wait_stream(self.stream)
        return out

    def capture_all(self, phases: list[Callable[[], Any]]) -> tuple[list[Any], list[Any]]:
        """Capture each phase in order into its own graph (sharing one memory pool), running
        nothing: (graphs, each phase's outputs)."""
        torch.cuda.synchronize(self.env.device)
        graphs, outputs = [], []
        for phase in phases:
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self.env.rng)
            pool = graphs[0].pool() if graphs else None
            with torch.cuda.graph(graph, pool=pool, stream=self.stream):
                outputs.append(phase())
            graphs.append(graph)
        return graphs, outputs

    @staticmethod
    def replay(graph) -> None:
        graph.replay()


def check_cuda_graph_preconditions(env) -> None:
    caps = env.backend.capabilities
    problems = []
    if env.device.type != "cuda":
        problems.append(f"a CUDA device (the env is on {env.device})")
    if caps.data_plane is not DataPlane.DEVICE or caps.selected_reset_publication is not ResetPublication.IMMEDIATE:
        problems.append("a backend with a device data plane and immediate reset publication (this one: "
                        f"{caps.data_plane.value}, {caps.selected_reset_publication.value})")
    if env.cfg.recorders:
        problems.append(f"no recorders (configured: {sorted(env.cfg.recorders)})")
    if env.cfg.profile_phases:
        problems.append("profile_phases=false")
    if problems:
        raise ValueError("cuda_graph=true needs " + "; ".join(problems) + "; cuda_graph=false steps eagerly "
                         "(on the unilab-train command line: env.cuda_graph=false)")


@dataclass(frozen=True)
class StepPhases:
    """The env's step after physics, whole (``after_physics``: the eager step) and in the
    pieces the graphs hold or run between them."""

    after_physics: Callable[[], tuple]  # -> (obs, reward, terminated, truncated, final_obs)
    update: Callable[[], tuple]  # -> (terminated, truncated, reward, done, pushed, final_obs)
    reset: Callable[[Any, Any], tuple]  # (done, pushed) -> (rows, qpos, qvel) to write
    write: Callable[..., None]  # (rows, qpos, qvel): the backend's set_state_where
    observe: Callable[[], dict]  # -> obs


class StepGraphs:
    def __init__(self, env, phases: StepPhases, warmup: int = 3, runtime=None) -> None:
        """``runtime`` stands in for CUDA graphs in a host test; by default the preconditions
        are checked and CUDA graphs are used."""
        if runtime is None:
            check_cuda_graph_preconditions(env)
            runtime = CudaGraphRuntime(env)
        self.env = env
        self.phases = phases
        self.warmup = warmup
        self.runtime = runtime
        self.eager_steps = 0
        self.graphs: list[Any] | None = None
        self.outputs: list[Any] = []

    def invalidate(self) -> None:
        self.graphs = None
        self.eager_steps = 0

    def run(self) -> tuple:
        """The step after physics: (obs, reward, terminated, truncated, final_obs)."""
        env, runtime, phases = self.env, self.runtime, self.phases
        if self.graphs is None and self.eager_steps < self.warmup:
            self.eager_steps += 1
            return runtime.eager(phases.after_physics)
        if self.graphs is None:
            self._capture()
        update, reset, observe = self.graphs
        (terminated, truncated, reward, _, _, final_obs), write, obs = self.outputs
        runtime.replay(update)
        env.curriculum_manager.update(env)
        runtime.replay(reset)
        phases.write(*write)
        runtime.replay(observe)
        return (_copy(obs), reward.clone(), terminated.clone(), truncated.clone(), _copy(final_obs))

    def _capture(self) -> None:
        env, phases = self.env, self.phases
        updated: list[Any] = []

        def update():
            updated.extend(phases.update())
            return updated

        def observe():
            env.robot.invalidate()  # graph 3 reads the written state, as the eager step does
            return phases.observe()

        self.graphs, self.outputs = self.runtime.capture_all(
            [update, lambda: phases.reset(updated[3], updated[4]), observe])


def _copy(group: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in group.items()}
