"""Replayed step graphs after the env's state changed outside a step, on the host stand-in
(tests/recorded_graphs.py): a resume into an env whose graphs are already captured, and
observation history, whose buffers a capture must leave as they were."""

from __future__ import annotations

import pytest
import torch
from test_step_graphs import BUSY_HEADING, BUSY_TRACKING, _recorded, _same_steps


def _load_into_both(eager, graphed, state) -> None:
    for env in (eager, graphed):
        env.load_training_state(state)


@pytest.mark.parametrize("task", ["g1_motion_tracking", "g1_walk_flat"])
def test_a_training_state_loaded_after_capture_is_replayed_as_the_eager_step_takes_it(make_env, task):
    # The resume writes the sampler's failure statistics in place and the step counter on the host;
    # the replayed graphs must draw from the loaded statistics and clamp with the curriculum stage
    # the counter selects (walking: the heading controller's narrowed yaw-rate limit).
    overrides = BUSY_TRACKING if task == "g1_motion_tracking" else BUSY_HEADING
    eager = make_env(task=task, backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=overrides)
    graphed = _recorded(make_env(task=task, backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=overrides))
    gen = torch.Generator().manual_seed(0)
    _same_steps(eager, graphed, 6, gen)
    assert graphed.step_graphs.graphs is not None  # captured before the load
    state = eager.training_state()
    if task == "g1_motion_tracking":
        failed = state["commands"]["motion"]["failed"]
        state["commands"]["motion"]["failed"] = 5.0 * torch.rand(failed.shape, generator=gen)
    else:
        state["step_counter"] = 100  # past the stage that narrows ang_vel_z
    _load_into_both(eager, graphed, state)
    assert _same_steps(eager, graphed, 25, gen) > 0
    assert graphed.step_graphs.runtime.captures == 1  # nothing asked for a capture again
    assert eager.flush_metrics() == pytest.approx(graphed.flush_metrics(), rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_observation_history_is_replayed_as_the_eager_step_stacks_it(make_env, task):
    # The stand-in puts back every tensor the env carries after a capture, the history buffers
    # included (its walk once skipped the observation manager, whose path starts with "env.obs").
    overrides = {**(BUSY_TRACKING if task == "g1_motion_tracking" else BUSY_HEADING),
                 "observations.policy.history_length": 3}
    eager = make_env(task=task, backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=overrides)
    graphed = _recorded(make_env(task=task, backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=overrides))
    assert _same_steps(eager, graphed, 25, torch.Generator().manual_seed(0)) > 0
    assert graphed.step_graphs.runtime.captures == 1
