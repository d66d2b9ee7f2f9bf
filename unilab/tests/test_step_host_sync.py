"""env.step makes no host sync of its own: resets and pushes included.

The probe (unisim.host_sync) records every dispatched op that makes the host wait; on a
backend that declares DEVICE_MASKED_RESET nothing in a whole step may appear, and on the
host-bridge mujoco backend only the backend's own calls may sync (it runs on the host).
"""

from __future__ import annotations

import torch
from controlled_owner import force_done
from reset_friction_owner import register_reset_friction_task
from unisim import Feature
from unisim.host_sync import HostSyncProbe

SYNC_FREE = ["validate_actions=false"]
# Pushes every step or two, so the interval half of the transaction runs too.
PUSH_OFTEN = ["events.push.interval_range_s=[0.02,0.04]"]


def _force_resets(env, rows: list[int]) -> None:
    mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    mask[rows] = True
    force_done(env, mask)


def _probe_steps(env, steps: int, probe: HostSyncProbe, force_rows: list[int] | None) -> None:
    action = torch.zeros(env.num_envs, env.action_dim, device=env.device)
    for _ in range(steps):
        if force_rows is not None:
            with probe.paused():
                _force_resets(env, force_rows)
        env.step(action)


def test_mjwarp_step_with_resets_makes_no_host_sync(make_env):
    env = make_env(backend="mjwarp", overrides=SYNC_FREE)
    assert env.backend.capabilities.has(Feature.DEVICE_MASKED_RESET)
    with HostSyncProbe() as probe:
        _probe_steps(env, 3, probe, force_rows=[1, 2])
    assert probe.syncs == []
    assert probe.op_count > 100  # the probe saw the step's work
    assert env.episode_length[1].item() == 0 and env.episode_length[0].item() == 3  # the resets happened


def test_mjwarp_step_with_pushes_makes_no_host_sync(make_env):
    env = make_env(task="g1_walk_flat", backend="mjwarp", overrides=SYNC_FREE + PUSH_OFTEN)
    before = env.robot.qvel.clone()
    with HostSyncProbe() as probe:
        _probe_steps(env, 3, probe, force_rows=None)
    assert probe.syncs == []
    assert not torch.equal(before, env.robot.qvel)


def test_mjwarp_step_with_a_reset_mode_friction_event_makes_no_host_sync(make_env):
    # The event writes geom_friction for every row each step (masked by the resets); the
    # backend's sliding-friction minimum was proven once, at the term's construction.
    task = register_reset_friction_task("test_sync_free_reset_friction", (0.5, 1.5))
    env = make_env(task=task, backend="mjwarp", overrides=SYNC_FREE)
    before = env.backend.model_field("geom_friction").clone()
    with HostSyncProbe() as probe:
        _probe_steps(env, 3, probe, force_rows=[1])
    assert probe.syncs == []
    after = env.backend.model_field("geom_friction")
    assert not torch.equal(after[1], before[1]) and torch.equal(after[0], before[0])


def test_mujoco_step_syncs_only_inside_the_host_bridge_backend(make_env):
    env = make_env(backend="mujoco", overrides=SYNC_FREE)
    with HostSyncProbe() as probe, probe.ignoring(env.backend, "step", "set_state_where"):
        _probe_steps(env, 3, probe, force_rows=[0, 3])
    assert probe.syncs == []


def test_action_validation_is_the_one_opt_in_sync(make_env):
    env = make_env(backend="mujoco")  # validate_actions defaults to true
    with HostSyncProbe() as probe, probe.ignoring(env.backend, "step", "set_state_where"):
        _probe_steps(env, 1, probe, force_rows=None)
    assert len(probe.syncs) == 1 and "env.py" in probe.syncs[0], probe.syncs
