"""Raw physics plus one of the env's extras per step, to split the env's gap to raw physics.

- ``raw_with_state_write``: each step also calls ``set_state_where`` with no row selected and
  the current state. The env's reset commit makes this call every step, resets or not, so the
  backend republishes its views for every world.
- ``raw_with_torch_ops``: each step also issues ``k`` small elementwise torch ops on the
  backend's device, in the stream the physics runs in (``k``: the env's kernel ops per step).
- ``raw_replaying_env_writes``: raw physics doing the env's own physics workload. The env first
  runs the window untimed while its ``set_state_where`` calls are recorded (episode starts of
  the rows that reset, pushed velocities); then, from the same start state, raw physics steps
  with the env's last ctrl and replays those writes at the same steps. Resets put robots into
  states the solver finds harder than the settled states plain raw physics drifts into, so
  env / this row is the runtime's own cost and this row / raw the workload's.

The first two run from the env's current states and put them back, like the raw row; the
replay row leaves the env at the state its own steps reached. All are timed
streamed by the caller's ``time_steps(device, steps, fn)``. ``solver_iterations`` compares, untimed,
the constraint solver's iterations after each env step and after each raw step from the same
states, where the backend reports them (``diagnostics()['solver_niter_mean'|'solver_niter_max']``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")

TimeSteps = Callable[[torch.device, int, Callable[[int], object]], float]


def _restoring(env, run: Callable[[], T]) -> T:
    views = env.backend.views()
    qpos, qvel = views.qpos.clone(), views.qvel.clone()
    try:
        return run()
    finally:
        env.backend.set_state(torch.arange(env.num_envs, device=env.device), qpos, qvel)
        env.robot.invalidate()


def raw_with_state_write(env, steps: int, time_steps: TimeSteps) -> float:
    backend, ctrl = env.backend, env.action_manager.ctrl.clone()
    none = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)

    def step(_: int) -> None:
        backend.step(ctrl, env.decimation)
        views = backend.views()
        backend.set_state_where(none, views.qpos, views.qvel)

    return _restoring(env, lambda: time_steps(env.device, steps, step))


def raw_with_torch_ops(env, steps: int, time_steps: TimeSteps, ops: int) -> float:
    backend, ctrl = env.backend, env.action_manager.ctrl.clone()
    x = torch.zeros(env.num_envs, 8, device=env.device)

    def step(_: int) -> None:
        backend.step(ctrl, env.decimation)
        for _ in range(ops):
            x.add_(1.0)  # one kernel each, about the size of a manager term's

    return _restoring(env, lambda: time_steps(env.device, steps, step))


def solver_iterations(env, action: torch.Tensor, steps: int) -> dict[str, dict[str, float]] | None:
    """Per step (last substep), over ``steps`` env steps and then ``steps`` raw steps from the
    states they reached: the mean over worlds and the max over worlds, each averaged over steps."""
    if "solver_niter_mean" not in env.backend.diagnostics():
        return None
    out = {}

    def collect(name: str, step: Callable[[], object]) -> None:
        means, maxes = [], []
        for _ in range(steps):
            step()
            diag = env.backend.diagnostics()  # a host read: this pass is not timed
            means.append(diag["solver_niter_mean"])
            maxes.append(diag["solver_niter_max"])
        out[name] = {"mean_over_worlds": sum(means) / steps, "max_over_worlds": sum(maxes) / steps}

    collect("env", lambda: env.step(action))
    ctrl = env.action_manager.ctrl.clone()
    _restoring(env, lambda: collect("raw", lambda: env.backend.step(ctrl, env.decimation)))
    return out


def raw_replaying_env_writes(env, steps: int, time_steps: TimeSteps, action: torch.Tensor) -> float:
    backend, rows = env.backend, torch.arange(env.num_envs, device=env.device)
    views = backend.views()
    start = views.qpos.clone(), views.qvel.clone()
    writes: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    write = backend.set_state_where

    def record(mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        writes.append((mask.clone(), qpos.clone(), qvel.clone()))
        write(mask, qpos, qvel)

    backend.set_state_where = record  # the env's one write per step, seen through its backend
    try:
        for _ in range(steps):
            env.step(action)
    finally:
        del backend.set_state_where
    if len(writes) != steps:
        raise RuntimeError(f"raw_replaying_env_writes: expected one set_state_where per env step, saw "
                           f"{len(writes)} in {steps} steps")
    reached = backend.views()
    end = reached.qpos.clone(), reached.qvel.clone()
    ctrl = env.action_manager.ctrl.clone()
    backend.set_state(rows, *start)

    def step(k: int) -> None:
        backend.step(ctrl, env.decimation)
        backend.set_state_where(*writes[k])

    try:
        return time_steps(env.device, steps, step)
    finally:  # the env goes on from the state it reached, as its managers did
        backend.set_state(rows, *end)
        env.robot.invalidate()
