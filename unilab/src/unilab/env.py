"""ManagerBasedRlEnv: the training environment every task owner is built into."""

from __future__ import annotations

import math
from typing import Any

import torch
import unisim

from unilab.config import EnvCfg
from unilab.managers.action import ActionManager
from unilab.managers.command import CommandManager
from unilab.managers.curriculum import CurriculumManager
from unilab.managers.event import EventManager, StateTransaction
from unilab.managers.metric import MetricManager
from unilab.managers.observation import ObservationManager
from unilab.managers.phase_timer import StepPhaseTimer
from unilab.managers.recorder import RecorderManager
from unilab.managers.reward import RewardManager
from unilab.managers.sensor import SensorManager
from unilab.managers.termination import TerminationManager
from unilab.mirror import declared_by_all
from unilab.robot import RobotState
from unilab.step_graphs import StepGraphs, StepPhases
from unilab.terrains.generator import Terrain, generate_terrain
from unilab.terrains.placement import TerrainPlacement

MAX_EPISODE_STEPS = 2**62  # fits the int64 episode-length counters with room to count past it


class ManagerBasedRlEnv:
    """A batch of ``num_envs`` episodes of one task owner on one SimBackend.

    The env knows no task: commands, sensors, rewards, terminations, observations, events
    and metrics are the owner's terms. ``step(action)`` runs, in this order:

    1. action: validate, then ``ctrl = offset + scale * clip(action)`` (action manager);
    2. physics: ``backend.step(ctrl, decimation)``; derived state caches are dropped;
    3. sensors: each updates once from the new state (e.g. foot contact timers);
    4. terminations: ``terminated`` (terminal terms) vs ``truncated`` (time-out terms);
    5. rewards: weighted terms on the post-physics, pre-reset state, scored against the
       command the policy acted on; per-component episode sums;
    6. commands: each term records its metrics (also against the command the policy
       acted on), then advances (timers tick, expired rows resample; masked, no row list);
       interval event timers tick;
    7. final observations: every group on the post-physics, pre-reset state with the
       advanced commands (history not advanced), returned as ``info["final_obs"]`` (done
       rows are the meaningful ones);
    8. ONE reset transaction for done = terminated | truncated, in two halves:
       a. masked, no row list (so no host sync; on a DEVICE plane these kernels queue
          behind physics): curriculum (its per-step terms; then, in the transaction, the
          levels of the rows whose episodes ended); every manager's bookkeeping for done rows (episode
          metrics accumulated, episode sums zeroed, actions zeroed, commands resampled,
          sensors and history restarted, episode lengths zeroed); every reset-mode event
          writes an episode start for all rows into the transaction (model-field events
          write their fields, masked); interval events (pushes) edit its velocities where
          they fired;
       b. commit: the transaction becomes full-size (N, nq)/(N, nv) state plus the mask of
          rows that reset or were pushed, written by ONE ``backend.set_state_where`` call.
          No row list, so no host sync: on a backend declaring DEVICE_MASKED_RESET the
          whole step queues on the device. The contract makes the written rows' views
          authoritative on return; nothing re-steps physics. Commands then refresh from
          the written state;
    9. observations of the post-reset state (done rows show their new episode);
    10. metrics: metric terms accumulate on device (flushed by ``flush_metrics``), recorders.

    Rewards come before commands advance so that a reward never scores a command the
    policy did not see (on a resample step, or every step for a heading controller).
    Ended envs reset inside ``step``; ``obs`` is post-reset. Construction performs a full
    reset, so ``step`` may be called before ``reset``.

    With ``cfg.cuda_graph`` the same steps 3-10 replay from three CUDA graphs, split where
    the host acts (the curriculum) and where the backend writes (``unilab.step_graphs``).
    """

    def __init__(self, cfg: EnvCfg, backend: str, num_envs: int, device=None, seed: int = 0) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs: expected an int >= 1, got {num_envs!r}")
        self.cfg = cfg
        options = {"validate": False, **cfg.backend_options}  # our own inputs are checked here
        contacts = [unisim.ContactSensorSpec(name=name, **c.model_dump()) for name, c in cfg.contact_sensors.items()]
        scans = [unisim.HeightScanSpec(name=name, **c.model_dump()) for name, c in cfg.height_scans.items()]
        terrain, scene = self._scene(cfg)
        self.backend = unisim.create_backend(backend, model=str(scene), num_envs=num_envs, device=device,
                                             contact_sensors=contacts, height_scans=scans, **options)
        try:
            self._build(cfg, num_envs, seed, terrain)
        except BaseException:
            self.backend.close()
            raise

    @staticmethod
    def _scene(cfg: EnvCfg) -> tuple[Terrain | None, Any]:
        """The scene's MJCF, standing on ``cfg.terrain`` when there is one (written by asset
        authoring, which the runtime reaches only here)."""
        if cfg.terrain is None:
            return None, cfg.scene()
        from unilab.assets.terrain_mjcf import terrain_scene_path

        terrain = generate_terrain(cfg.terrain)
        return terrain, terrain_scene_path(cfg.scene(), terrain)

    def _build(self, cfg: EnvCfg, num_envs: int, seed: int, terrain: Terrain | None) -> None:
        self.num_envs = num_envs
        self.device = self.backend.device
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)
        # Each env's place on the terrain, which terms read from their construction on.
        self.terrain = None if terrain is None else TerrainPlacement(terrain, num_envs, self.device, self.rng)
        self.robot = RobotState(self.backend)
        inv = self.robot.inventory
        self.physics_dt = float(self.backend.timestep)
        self.decimation = cfg.decimation
        self.step_dt = self.physics_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt - 1e-9)
        if self.max_episode_length > MAX_EPISODE_STEPS:  # episode lengths are int64 counters on the device
            raise ValueError(f"episode_length_s: {cfg.episode_length_s} s at {self.step_dt} s per env step is more "
                             f"than {MAX_EPISODE_STEPS} env steps")
        self.closed = False
        names = [k.name for k in inv.keyframes]
        if cfg.reset_keyframe not in names:
            raise ValueError(f"reset_keyframe: unknown keyframe {cfg.reset_keyframe!r}; available: {names}")
        key = inv.keyframe(cfg.reset_keyframe)
        self.default_qpos = torch.tensor(key.qpos, dtype=torch.float32, device=self.device)
        self.default_qvel = torch.tensor(key.qvel, dtype=torch.float32, device=self.device)
        self.default_joint_pos = self.default_qpos[self.robot.joint_qpos_index].clone()
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.common_step_counter = 0
        self.timer = StepPhaseTimer(self.device, cfg.profile_phases)
        self.step_phases = StepPhases(after_physics=self._after_physics, update=self._update_phase,
                                      reset=self._reset_phase, write=self._write_state, observe=self._observe_phase)
        self.step_graphs = StepGraphs(self, self.step_phases) if cfg.cuda_graph else None  # checks its needs

        # Managers declare their metrics while they are built; the metric manager's own
        # terms come last and allocate the accumulators.
        self.metric_manager = MetricManager(self)
        self.sensor_manager = SensorManager(cfg.sensors, self)
        self.action_manager = ActionManager(cfg.actions, self)
        self.action_dim = self.action_manager.action_dim
        self.command_manager = CommandManager(cfg.commands, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self, cfg.reward_scale_by_dt)
        self.event_manager = EventManager(cfg.events, self)
        self.curriculum_manager = CurriculumManager(cfg.curriculum, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        self.observation_spec: dict[str, int] = dict(self.observation_manager.spec)
        self.mirrors = self._mirrors()
        self.metric_manager.build(cfg.metrics)
        self.recorder_manager = RecorderManager(cfg.recorders, self)
        self._all_rows_mask = torch.ones(num_envs, dtype=torch.bool, device=self.device)
        self._no_rows_mask = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        # The episode starts the reset events fill. Refilled from the default pose at each
        # transaction, unless a reset event overwrites all of it every time (then the same
        # storage serves every step: two full-state copies fewer per step).
        self._reset_state = (self.default_qpos.expand(num_envs, -1).clone(),
                             self.default_qvel.expand(num_envs, -1).clone())
        self.event_manager.startup(self, self._transaction(self._all_rows_mask, self._no_rows_mask))
        self.obs = self.reset()

    def sensor(self, name: str, owner: str):
        """The configured sensor ``name`` (for a term's constructor); an unknown name fails
        naming ``owner`` and the configured sensors."""
        return self.sensor_manager.get(name, owner)

    def _mirrors(self) -> dict | None:
        """The task's left-right reflection (``unilab.mirror``) as the runner contract gives
        it: ``{"observations": {group: (index, sign)}, "action": (index, sign)}``, or None when
        the task declares none. Declared for some parts and not others, it is refused."""
        groups, action = self.observation_manager.mirrors(), self.action_manager.mirror
        if not declared_by_all({**{f"observations.{g}": m for g, m in groups.items()}, "actions": action}, "mirror:"):
            return None
        return {"observations": {g: (m.index, m.sign) for g, m in groups.items()},
                "action": (action.index, action.sign)}

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The on-device metrics ``flush_metrics`` reports, as declared by the terms."""
        return tuple(self.metric_manager.names)

    # ---- runner contract ---------------------------------------------------------------
    def reset(self) -> dict[str, torch.Tensor]:
        """Reset every env (episodes cut here are not logged) and return observations."""
        self._check_open()
        # No condition fired on a reset outside a step: a term that reads this step's
        # terminations while resetting (the tracking sampler's failures) must not see the last step's.
        self.termination_manager.forget_fired()
        self._commit(self._begin_reset(self._all_rows_mask, None, log=False))
        self.obs = self.observation_manager.compute(self)
        return self.obs

    def step(self, action: torch.Tensor):
        self._check_action(action)
        timer = self.timer
        timer.start("step_total_ms")
        timer.start("action_ms")
        ctrl = self.action_manager.process(action)
        timer.stop("action_ms")
        timer.start("backend_step_ms")
        self.backend.step(ctrl, self.decimation)
        timer.stop("backend_step_ms")
        self.action_manager.commit(action)
        self.robot.invalidate()
        self.common_step_counter += 1
        self.metric_manager.count_step()
        runs = self._after_physics if self.step_graphs is None else self.step_graphs.run
        obs, reward, terminated, truncated, final_obs = runs()
        timer.stop("step_total_ms")
        timer.tick()
        self.obs = obs
        return obs, reward, terminated, truncated, {"final_obs": final_obs}

    def invalidate_step_graphs(self) -> None:
        """Capture the step's graphs again before the next replay. A term calls it when it
        changes what its Python does in a step (an evaluation hook pinning commands or
        clips); a replay would otherwise run the old choice. Nothing to do without graphs."""
        if self.step_graphs is not None:
            self.step_graphs.invalidate()

    # ---- the phases of a step (each one CUDA graph with ``cuda_graph``) ----------------
    def _after_physics(self):
        """Steps 3-10 of the step, eagerly: (obs, reward, terminated, truncated, final_obs)."""
        terminated, truncated, reward, done, pushed, final_obs = self._update_phase()
        self.curriculum_manager.update(self)
        self._write_state(*self._reset_phase(done, pushed))
        return self._observe_phase(), reward, terminated, truncated, final_obs

    def _update_phase(self):
        """Post-physics, before the curriculum: sensors, episode lengths, terminations,
        rewards, the commands' metrics and advance, interval timers, final observations."""
        timer = self.timer
        timer.start("update_state_ms")
        self.sensor_manager.update(self)
        self.episode_length += 1
        terminated, truncated = self.termination_manager.compute(self)
        reward = self.reward_manager.compute(self)
        self.command_manager.record_metrics(self.metric_manager)
        self.command_manager.step(self.step_dt)
        done = terminated | truncated
        pushed = self.event_manager.tick_interval(self, self.step_dt)
        timer.stop("update_state_ms")
        timer.start("final_obs_ms")
        final_obs = self.observation_manager.compute(self, commit=False)
        timer.stop("final_obs_ms")
        timer.start("reset_done_ms")  # stopped in _observe_phase: curriculum, reset, write, refresh
        return terminated, truncated, reward, done, pushed, final_obs

    def _reset_phase(self, done: torch.Tensor, pushed: torch.Tensor | None):
        """The reset transaction, up to the full-size state it writes."""
        return self._commit_state(self._begin_reset(done, pushed, log=True))

    def _observe_phase(self) -> dict[str, torch.Tensor]:
        """After the state write: the commands' refresh, observations, metrics, recorders."""
        timer = self.timer
        self.command_manager.refresh()
        timer.stop("reset_done_ms")
        timer.start("observation_ms")
        obs = self.observation_manager.compute(self)
        timer.stop("observation_ms")
        timer.start("metrics_ms")
        self.metric_manager.on_step(self)
        if self.recorder_manager.terms:
            self.recorder_manager.record(self)
        timer.stop("metrics_ms")
        return obs

    def training_state(self) -> dict[str, Any]:
        """What a training run carries into its next session beside the learner's state: the
        vectorized step count (curricula pick their stage from it) and what command terms
        learned (the tracking task's failure statistics). Episodes are not carried: a resumed
        env starts new ones, from its own seed."""
        self._check_open()
        return {"step_counter": self.common_step_counter, "commands": self.command_manager.state_dict()}

    def load_training_state(self, state: dict[str, Any]) -> None:
        """Take back ``training_state()`` of an env of the same task and overrides, before stepping."""
        self._check_open()
        if not isinstance(state, dict) or set(state) != {"step_counter", "commands"}:
            got = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise ValueError(f"training state: expected the keys ['commands', 'step_counter'], got {got}")
        counter = state["step_counter"]
        if not isinstance(counter, int) or isinstance(counter, bool) or counter < 0:
            raise ValueError(f"training state: step_counter={counter!r}, expected an int >= 0")
        self.command_manager.load_state_dict(state["commands"])
        self.common_step_counter = counter

    def flush_metrics(self) -> dict[str, float]:
        out = self.metric_manager.flush()  # one host sync
        out.update(self.timer.flush())
        out.update(self.curriculum_manager.state)
        return out

    def simulator_diagnostics(self) -> dict[str, Any]:
        # The backend's own facts (its keys); a host read, for the end of a run.
        return self.backend.diagnostics()

    def close(self) -> None:
        self.closed = True
        self.backend.close()

    def _check_open(self) -> None:
        # Before any manager's bookkeeping, so a call after close() changes nothing.
        if self.closed:
            raise ValueError("env: used after close()")

    # ---- internals -----------------------------------------------------------------
    def _check_action(self, action) -> None:
        self._check_open()
        if not isinstance(action, torch.Tensor):
            # One error type (ValueError) for every bad input, as the runner contract says.
            raise ValueError(f"action: expected a torch.Tensor, got {type(action).__name__}")  # noqa: TRY004
        if action.layout != torch.strided:
            raise ValueError(f"action: expected a dense (strided) tensor, got layout {action.layout}")
        if action.dtype != torch.float32:
            raise ValueError(f"action: expected dtype torch.float32, got {action.dtype}")
        if tuple(action.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"action: expected shape {(self.num_envs, self.action_dim)}, got {tuple(action.shape)}")
        if action.device != self.device:
            raise ValueError(f"action: expected device {self.device}, got {action.device}")
        if action.requires_grad:  # the action manager writes into preallocated buffers
            raise ValueError("action: expected a tensor without autograd (requires_grad=False); pass action.detach()")
        if self.cfg.validate_actions and not bool(torch.isfinite(action).all()):
            raise ValueError("action: expected finite values, got NaN or inf (env state untouched)")

    def _begin_reset(self, done: torch.Tensor, pushed: torch.Tensor | None, log: bool) -> StateTransaction:
        """Every manager's reset bookkeeping for the ``done`` rows, masked (no row list, so
        no host sync; on a DEVICE plane it queues behind physics), and the transaction's
        state filled by the events."""
        # For bools, a > b is a and not b: pushed rows that do not reset, in one kernel.
        interval = self._no_rows_mask if pushed is None else torch.gt(pushed, done)
        metrics = self.metric_manager if log else None
        if log:
            self.metric_manager.episodes_ended(done)
            # First: a curriculum reads the ended episodes (how far each env walked, what its command
            # asked) before the commands resample and the events write new starts. A reset outside a
            # step cuts episodes rather than ending them, and moves no curriculum.
            if self.curriculum_manager.resetting:
                self.curriculum_manager.reset(done)
        self.reward_manager.reset(done, metrics)
        self.termination_manager.reset(done, metrics)
        self.sensor_manager.reset(done)
        self.action_manager.reset(done)
        self.command_manager.reset(done)
        self.observation_manager.reset(done)
        self.episode_length.masked_fill_(done, 0)
        txn = self._transaction(done, interval)
        self.event_manager.apply(self, txn)
        return txn

    def _transaction(self, reset: torch.Tensor, interval: torch.Tensor) -> StateTransaction:
        qpos, qvel = self._reset_state
        if not self.event_manager.fills_reset_state:
            qpos, qvel = qpos.copy_(self.default_qpos), qvel.copy_(self.default_qvel)
        return StateTransaction(reset, interval, qpos, qvel, self.robot.qvel.clone())

    def _commit(self, txn: StateTransaction) -> None:
        """ONE ``set_state_where`` call for the rows that reset (their episode start) or were
        pushed (their edited velocities); no row list, so no host sync."""
        self._set_state(*self._commit_state(txn))
        self.command_manager.refresh()

    def _commit_state(self, txn: StateTransaction) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The rows to write and the full-size state they take."""
        reset = txn.reset.unsqueeze(1)
        qpos = torch.where(reset, txn.reset_qpos, self.robot.qpos)
        qvel = torch.where(reset, txn.reset_qvel, txn.qvel)
        return txn.reset | txn.interval, qpos, qvel

    def _write_state(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """The step's state write, timed as its own phase (writes outside a step are not)."""
        self.timer.start("reset_done_reset_call_ms")
        self._set_state(rows, qpos, qvel)
        self.timer.stop("reset_done_reset_call_ms")

    def _set_state(self, rows: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        self.backend.set_state_where(rows, qpos, qvel)
        self.robot.invalidate()
