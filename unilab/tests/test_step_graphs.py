"""``cuda_graph=true``: the step's manager phases replayed from CUDA graphs.

On the host: the setting is refused where it cannot hold, naming what it needs. On a GPU
(the device machine): the graphed env makes the eager one's decisions from the same seed, through
time-outs, pushes, command resamples and a curriculum stage, and an evaluation hook set
after capture takes effect."""

from __future__ import annotations

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (device machine)")


def test_cuda_graph_is_refused_on_the_host_naming_every_unmet_need(make_env):
    with pytest.raises(ValueError, match=r"cuda_graph=true needs a CUDA device \(the env is on cpu\); a backend with "
                                         r"a device data plane and immediate reset publication \(this one: "
                                         r"host_bridge, immediate\); profile_phases=false"):
        make_env(task="g1_walk_flat", backend="mujoco", num_envs=2,
                 overrides={"cuda_graph": True, "profile_phases": True})
    with pytest.raises(ValueError, match=r"cuda_graph=true needs a CUDA device \(the env is on cpu\); cuda_graph=false "
                                         r"steps eagerly \(on the unilab-train command line: env.cuda_graph=false\)$"):
        make_env(task="g1_walk_flat", backend="mjwarp", device="cpu", num_envs=2, overrides={"cuda_graph": True})


# Every masked path within a few dozen steps: 0.3 s episodes (time-outs and resets), pushes
# every step or two, command resamples every 0.1-0.2 s, the curriculum widening at step 10.
BUSY = {"episode_length_s": 0.3, "events.push.interval_range_s": (0.02, 0.04),
        "commands.twist.resampling_time_range_s": (0.1, 0.2), "validate_actions": False,
        "curriculum.command_ranges.params.stages": [
            {"step": 0, "lin_vel_x": (-1.0, 1.0)}, {"step": 10, "lin_vel_x": (-1.5, 2.0)}]}


def _recorded(env):
    """The env's step graphs on the host stand-in (tests/recorded_graphs.py)."""
    from recorded_graphs import RecordedGraphRuntime
    from test_carried_state import carried_tensors
    from unilab.step_graphs import StepGraphs

    env.step_graphs = StepGraphs(env, env.step_phases, runtime=RecordedGraphRuntime(env, carried_tensors))
    return env


def _same_steps(eager, graphed, steps: int, gen: torch.Generator, scale: float = 0.3) -> int:
    """Steps both with the same actions, asserting equal results; returns the resets seen."""
    dones = 0
    for k in range(steps):
        action = (scale * torch.randn(eager.num_envs, eager.action_dim, generator=gen)).to(eager.device)
        a_obs, a_rew, a_term, a_trunc, a_info = eager.step(action)
        b_obs, b_rew, b_term, b_trunc, b_info = graphed.step(action)
        assert torch.equal(a_term, b_term) and torch.equal(a_trunc, b_trunc), k
        torch.testing.assert_close(b_rew, a_rew, atol=1e-4, rtol=1e-4)
        for group in a_obs:
            torch.testing.assert_close(b_obs[group], a_obs[group], atol=1e-3, rtol=1e-3)
            torch.testing.assert_close(b_info["final_obs"][group], a_info["final_obs"][group], atol=1e-3, rtol=1e-3)
        dones += int((a_term | a_trunc).sum())
    return dones


# Every row steering to a heading, whose yaw-rate limit the curriculum narrows at step 10: the
# limit a replayed step clamps with must be the curriculum's current one.
BUSY_HEADING = {**BUSY, "commands.twist.heading_command": True, "commands.twist.heading_fraction": 1.0,
                "commands.twist.heading_stiffness": 2.0, "curriculum.command_ranges.params.stages": [
                    {"step": 0, "ang_vel_z": (-1.0, 1.0)}, {"step": 10, "ang_vel_z": (-0.1, 0.1)}]}
BUSY_TRACKING = {"episode_length_s": 0.3, "events.push.interval_range_s": (0.02, 0.04), "validate_actions": False}
# The terrain curriculum moving every ended episode's level (and origin) in the replayed reset.
BUSY_ROUGH = {"episode_length_s": 0.3, "events.push.interval_range_s": (0.02, 0.04),
              "commands.twist.resampling_time_range_s": (0.1, 0.2), "validate_actions": False,
              "terrain.num_rows": 3, "terrain.num_cols": 7, "terrain.size": (4.0, 4.0), "terrain.border_width": 1.0,
              "terrain.resolution": 0.2}


@pytest.mark.parametrize(("task", "backend", "overrides"), [
    ("g1_walk_flat", "mjwarp", BUSY), ("g1_walk_flat", "mjwarp", BUSY_HEADING),
    ("g1_motion_tracking", "mjwarp", BUSY_TRACKING), ("g1_walk_rough", "mjwarp", BUSY_ROUGH),
    # Genesis is a device-plane backend with immediate publication too, so the graphs apply to it.
    pytest.param("g1_walk_flat", "genesis", BUSY, marks=pytest.mark.slow)])
def test_replaying_the_recorded_phases_is_the_eager_step(make_env, task, backend, overrides):
    eager = make_env(task=task, backend=backend, device="cpu", num_envs=16, seed=3, overrides=overrides)
    graphed = _recorded(make_env(task=task, backend=backend, device="cpu", num_envs=16, seed=3, overrides=overrides))
    dones = _same_steps(eager, graphed, 40, torch.Generator().manual_seed(0))
    assert graphed.step_graphs.runtime.captures == 1 and graphed.step_graphs.graphs is not None
    assert dones > 16  # every row reset at least once, through the replayed reset transaction
    assert eager.flush_metrics() == pytest.approx(graphed.flush_metrics(), rel=1e-4, abs=1e-5)
    # What a step returned stays the caller's (a collector keeps obs for the next insert).
    zero = torch.zeros(16, graphed.action_dim)
    obs, reward = graphed.step(zero)[:2]
    kept = {k: v.clone() for k, v in obs.items()}, reward.clone()
    graphed.step(zero)
    assert all(torch.equal(obs[k], kept[0][k]) for k in obs) and torch.equal(reward, kept[1])


def test_the_stand_in_catches_state_a_step_rebinds(make_env, monkeypatch):
    # The interval timers as they were written before they were kept in place: a replay
    # reads the first storage forever, so the pushes stop and the two envs part.
    from unilab.managers.event import EventManager

    def rebinding_tick(self, env, dt):
        self.time_left = self.time_left - dt
        self.fired = self.time_left <= 0.0
        self.time_left = torch.where(self.fired, self._periods(env, env.num_envs), self.time_left)
        return self.fired.any(dim=1)

    monkeypatch.setattr(EventManager, "tick_interval", rebinding_tick)
    eager = make_env(task="g1_walk_flat", backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=BUSY)
    graphed = _recorded(make_env(task="g1_walk_flat", backend="mjwarp", device="cpu", num_envs=16, seed=3, overrides=BUSY))
    with pytest.raises(AssertionError):
        _same_steps(eager, graphed, 40, torch.Generator().manual_seed(0))


def test_an_evaluation_hook_after_capture_is_captured_again_on_the_host(make_env):
    env = _recorded(make_env(task="g1_walk_flat", backend="mjwarp", device="cpu", num_envs=8, overrides=BUSY))
    zero = torch.zeros(8, env.action_dim)
    for _ in range(6):
        env.step(zero)
    assert env.step_graphs.runtime.captures == 1
    term = env.command_manager.term("twist")
    with pytest.raises(ValueError, match=r"commands: expected shape \(8, 3\)"):
        term.hold(torch.zeros(4, 3))  # bad input changes nothing, the captured graphs included
    assert env.step_graphs.graphs is not None and not term.held
    held = torch.tensor([[0.5, 0.0, 0.0]]).expand(8, 3)
    term.hold(held)
    for _ in range(12):  # past several resample times and time-outs
        env.step(zero)
        torch.testing.assert_close(term.command, held)
    assert env.step_graphs.runtime.captures == 2
    term.hold(None)


@needs_cuda
def test_the_graphed_step_makes_the_eager_steps_decisions(make_env):
    # MuJoCo Warp on CUDA is not bit-reproducible: two eager envs from one seed drift apart
    # within a few steps of an episode (observations 0.1-1 apart) and meet again when a reset
    # writes their state. So on the GPU the graphed env is held to what the managers decide:
    # the same terminations and time-outs, the same commands from the env's generator, and the
    # same observations of the rows a reset has just written. (The host stand-in,
    # recorded_graphs.py, shows full equality on a deterministic backend.)
    eager = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=64, seed=3, overrides=BUSY)
    graphed = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=64, seed=3,
                       overrides={**BUSY, "cuda_graph": True})
    gen = torch.Generator().manual_seed(0)
    resets = 0
    for k in range(45):  # 3 warm-up steps, the capture, then replays through three episodes
        action = (0.3 * torch.randn(64, eager.action_dim, generator=gen)).cuda()
        a_obs, _, a_term, a_trunc, _ = eager.step(action)
        b_obs, _, b_term, b_trunc, _ = graphed.step(action)
        assert torch.equal(a_term, b_term) and torch.equal(a_trunc, b_trunc), k
        assert torch.equal(eager.command_manager.term("twist").command,
                           graphed.command_manager.term("twist").command), k
        reset = a_term | a_trunc
        for group in a_obs:
            torch.testing.assert_close(b_obs[group][reset], a_obs[group][reset], atol=1e-4, rtol=1e-4)
        resets += int(reset.sum())
    assert graphed.step_graphs.graphs is not None  # it replayed
    assert resets >= 2 * 64  # every row reset at least twice, through the replayed reset transaction
    assert eager.flush_metrics().keys() == graphed.flush_metrics().keys()
    # A returned tensor is the caller's: the next replay does not overwrite it.
    zero = torch.zeros(64, graphed.action_dim, device="cuda")
    obs = graphed.step(zero)[0]["policy"]
    kept = obs.clone()
    graphed.step(zero)
    assert torch.equal(obs, kept)


@needs_cuda
def test_an_evaluation_hook_after_capture_takes_effect(make_env):
    env = make_env(task="g1_walk_flat", backend="mjwarp", device="cuda", num_envs=8,
                   overrides={**BUSY, "cuda_graph": True})
    zero = torch.zeros(8, env.action_dim, device="cuda")
    for _ in range(6):
        env.step(zero)
    assert env.step_graphs.graphs is not None
    term = env.command_manager.term("twist")
    held = torch.tensor([[0.5, 0.0, 0.0]], device="cuda").expand(8, 3)
    term.hold(held)  # the graphs are captured again with the held command
    for _ in range(12):  # past several resample times and time-outs
        env.step(zero)
        torch.testing.assert_close(term.command, held)
    term.hold(None)


@pytest.mark.parametrize(("task", "options"), [
    ("g1_walk_flat", {"envs_per_command": 1, "seconds": 0.6, "settle_s": 0.2}),
    ("g1_motion_tracking", {"envs_per_clip": 2})])
def test_the_task_evaluation_reports_the_same_on_replayed_graphs(make_env, task, options):
    # The evaluations pin commands or clips through the hooks, which capture the graphs again.
    from unilab.evaluation import task_evaluation

    evaluation = task_evaluation(task, options)
    reports = []
    for graphed in (False, True):
        env = make_env(task=evaluation.task, backend="mjwarp", device="cpu", num_envs=evaluation.num_envs(),
                       overrides={"validate_actions": False})
        if graphed:
            _recorded(env)
        gen = torch.Generator().manual_seed(1)
        policy = lambda obs, env=env, gen=gen: 0.3 * torch.randn(env.num_envs, env.action_dim, generator=gen)
        reports.append(evaluation.run(env, policy))
        if graphed:
            assert env.step_graphs.runtime.captures >= 1
    assert reports[1] == reports[0]  # the host stand-in runs the same ops: equal to the bit
