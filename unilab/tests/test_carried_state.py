"""State a manager or term carries from one step to the next keeps one storage for the env's
life: it is updated in place, never rebound to a new tensor. A step replayed from a captured
CUDA graph reads and writes fixed addresses, so a rebound timer or command would silently
stop advancing there; this pins the property on the host, for the built-in task families, through
resets, pushes, command resamples, a curriculum stage change and terrain level moves."""

from __future__ import annotations

import pytest
import torch
from unilab.robot import RobotState

# What a step produces rather than carries: returned to the caller or read later in the same
# step only, so a fresh tensor each step is right (a replayed graph returns copies of them).
STEP_OUTPUTS = ("env.obs", "env.termination_manager.fired", "env.termination_manager.terminated",
                "env.termination_manager.truncated", "env.reward_manager.last_components")


def _is_a_step_output(path: str) -> bool:
    # A whole name or what is under it: "env.obs" is an output, "env.observation_manager" is not.
    return any(path == name or path.startswith((f"{name}.", f"{name}[")) for name in STEP_OUTPUTS)


def carried_tensors(env) -> dict[str, torch.Tensor]:
    """Every tensor reachable from the env's managers and terms, by attribute path. The
    robot's derived-state cache is per state by design, and the backend is not the env's;
    the step graphs' own tensors (their outputs and, on the host stand-in, the recorded
    calls) are not state the step carries."""
    found: dict[str, torch.Tensor] = {}
    seen: set[int] = set()

    def walk(obj, path: str) -> None:
        if id(obj) in seen or isinstance(obj, RobotState) or _is_a_step_output(path):
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found[path] = obj
        elif isinstance(obj, dict):
            for key, value in obj.items():
                walk(value, f"{path}[{key!r}]")
        elif isinstance(obj, (list, tuple)):
            for i, value in enumerate(obj):
                walk(value, f"{path}[{i}]")
        elif type(obj).__module__.startswith("unilab") and hasattr(obj, "__dict__"):
            for key, value in vars(obj).items():
                if key not in ("env", "backend", "cfg", "step_graphs"):  # the graphs hold their own copies
                    walk(value, f"{path}.{key}")

    walk(env, "env")
    return found


CASES = {
    # Pushes every step or two, commands resampled every 0.1-0.2 s, the curriculum widening at
    # step 5 (the velocity task), random actions that make robots fall and reset.
    "g1_walk_flat": {"events.push.interval_range_s": (0.02, 0.04),
                     "commands.twist.resampling_time_range_s": (0.1, 0.2),
                     "curriculum.command_ranges.params.stages": [
                         {"step": 0, "lin_vel_x": (-1.0, 1.0)}, {"step": 5, "lin_vel_x": (-1.5, 2.0)}]},
    "g1_motion_tracking": {"events.push.interval_range_s": (0.02, 0.04)},
    # The terrain curriculum moves levels (and origins) of every ended episode.
    "g1_walk_rough": {"events.push.interval_range_s": (0.02, 0.04), "commands.twist.resampling_time_range_s": (0.1, 0.2),
                      "terrain.num_rows": 2, "terrain.num_cols": 7, "terrain.size": (4.0, 4.0),
                      "terrain.border_width": 1.0, "terrain.resolution": 0.2},
}


@pytest.mark.parametrize("task", sorted(CASES))
def test_carried_state_keeps_its_storage_across_steps(make_env, task):
    env = make_env(task=task, num_envs=16, overrides={"validate_actions": False, **CASES[task]})
    gen = torch.Generator().manual_seed(0)
    act = lambda: 2.0 * torch.rand(env.num_envs, env.action_dim, generator=gen) - 1.0
    env.step(act())
    start = carried_tensors(env)
    storage = {path: (t.data_ptr(), tuple(t.shape)) for path, t in start.items()}
    resets = pushes = 0
    for _ in range(40):
        _, _, terminated, truncated, _ = env.step(act())
        resets += int((terminated | truncated).sum())
        pushes += int(env.event_manager.fired.sum())
    assert resets > 0 and pushes > 0  # the masked write paths ran
    if task == "g1_walk_flat":
        assert env.curriculum_manager.state["curriculum/command_ranges/stage"] == 1.0
    now = carried_tensors(env)
    rebound = sorted(p for p in storage if p in now and (now[p].data_ptr(), tuple(now[p].shape)) != storage[p])
    assert rebound == []
    assert sorted(set(now) - set(storage)) == [] and sorted(set(storage) - set(now)) == []
    assert len(storage) > 20  # the walk reached the managers' and terms' state
