"""ManagerBasedRlEnv: the training environment every task owner is built into."""

from __future__ import annotations

import math

import torch
import unisim

from unilab.config import EnvCfg
from unilab.managers.action import ActionManager
from unilab.managers.command import CommandManager
from unilab.managers.curriculum import CurriculumManager
from unilab.managers.event import EventManager, StateTransaction
from unilab.managers.metric import MetricManager, PhaseTimer
from unilab.managers.observation import ObservationManager
from unilab.managers.recorder import RecorderManager
from unilab.managers.reward import RewardManager
from unilab.managers.termination import TerminationManager
from unilab.robot import RobotState


class ManagerBasedRlEnv:
    """A batch of ``num_envs`` episodes of one task owner on one SimBackend.

    ``step(action)`` runs, in this order:

    1. action: validate, then ``ctrl = offset + scale * clip(action)`` (action manager);
    2. physics: ``backend.step(ctrl, decimation)``; derived state caches are dropped;
    3. commands: timers tick, expired rows resample (masked, no row list);
    4. terminations: ``terminated`` (terminal terms) vs ``truncated`` (time-out terms);
    5. rewards: weighted terms on the post-physics, pre-reset state; episode sums;
    6. final observations: every group on the post-physics, pre-reset state (history not
       advanced), returned as ``info["final_obs"]`` (done rows are the meaningful ones);
    7. ONE reset transaction for done = terminated | truncated, in two halves:
       a. masked, no row list (so no host sync; on a DEVICE plane these kernels queue
          behind physics): curriculum; every manager's bookkeeping for done rows (episode
          sums logged and zeroed, actions zeroed, commands resampled, history marked,
          episode lengths zeroed); every reset-mode event writes an episode start for all
          rows into the transaction (model-field events write their fields, masked);
          interval events (pushes) edit its velocities where they fired;
       b. commit: the transaction becomes full-size (N, nq)/(N, nv) state plus the mask of
          rows that reset or were pushed, written by ONE ``backend.set_state_where`` call.
          No row list, so no host sync: on a backend declaring DEVICE_MASKED_RESET the
          whole step queues on the device. The contract makes the written rows' views
          authoritative on return; nothing re-steps physics;
    8. observations of the post-reset state (done rows show their new episode);
    9. metrics: accumulate on device (flushed by ``flush_metrics``), recorders.

    Ended envs reset inside ``step``; ``obs`` is post-reset. Construction performs a full
    reset, so ``step`` may be called before ``reset``.
    """

    def __init__(self, cfg: EnvCfg, backend: str, num_envs: int, device=None, seed: int = 0) -> None:
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs: expected an int >= 1, got {num_envs!r}")
        self.cfg = cfg
        options = {"validate": False, **cfg.backend_options}  # our own inputs are checked here
        self.backend = unisim.create_backend(backend, model=str(cfg.scene()), num_envs=num_envs,
                                             device=device, **options)
        try:
            self._build(cfg, num_envs, seed)
        except BaseException:
            self.backend.close()
            raise

    def _build(self, cfg: EnvCfg, num_envs: int, seed: int) -> None:
        self.num_envs = num_envs
        self.device = self.backend.device
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)
        self.robot = RobotState(self.backend)
        inv = self.robot.inventory
        self.physics_dt = float(self.backend.timestep)
        self.decimation = cfg.decimation
        self.step_dt = self.physics_dt * cfg.decimation
        self.max_episode_length = math.ceil(cfg.episode_length_s / self.step_dt - 1e-9)
        names = [k.name for k in inv.keyframes]
        if cfg.reset_keyframe not in names:
            raise ValueError(f"reset_keyframe: unknown keyframe {cfg.reset_keyframe!r}; available: {names}")
        key = inv.keyframe(cfg.reset_keyframe)
        self.default_qpos = torch.tensor(key.qpos, dtype=torch.float32, device=self.device)
        self.default_qvel = torch.tensor(key.qvel, dtype=torch.float32, device=self.device)
        self.default_joint_pos = self.default_qpos[self.robot.joint_qpos_index].clone()
        self.episode_length = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.common_step_counter = 0
        self.shared: dict = {}  # state shared by terms (e.g. foot contact timers)
        self.timer = PhaseTimer(self.device, cfg.profile_phases)

        self.action_manager = ActionManager(cfg.actions, self)
        self.action_dim = self.action_manager.action_dim
        self.command_manager = CommandManager(cfg.commands, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self, cfg.reward_scale_by_dt)
        self.event_manager = EventManager(cfg.events, self)
        self.curriculum_manager = CurriculumManager(cfg.curriculum, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        self.observation_spec: dict[str, int] = dict(self.observation_manager.spec)
        self.metric_manager = MetricManager(cfg.metrics, self, self.reward_manager.components,
                                            self.termination_manager.names)
        self.recorder_manager = RecorderManager(cfg.recorders, self)
        self._all_rows_mask = torch.ones(num_envs, dtype=torch.bool, device=self.device)
        self._no_rows_mask = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.event_manager.startup(self)
        self.obs = self.reset()

    # ---- runner contract ---------------------------------------------------------------
    def reset(self) -> dict[str, torch.Tensor]:
        """Reset every env (episodes cut here are not logged) and return observations."""
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
        self.robot.invalidate()

        timer.start("update_state_ms")
        self.episode_length += 1
        self.common_step_counter += 1
        self.command_manager.step(self.step_dt)
        terminated, truncated = self.termination_manager.compute(self)
        reward = self.reward_manager.compute(self)
        vel_err = self._velocity_error()
        done = terminated | truncated
        pushed = self.event_manager.tick_interval(self, self.step_dt)
        timer.stop("update_state_ms")

        timer.start("final_obs_ms")
        final_obs = self.observation_manager.compute(self, commit=False)
        timer.stop("final_obs_ms")
        timer.start("reset_done_ms")
        self.curriculum_manager.update(self)
        self._commit(self._begin_reset(done, pushed, log=True))
        timer.stop("reset_done_ms")

        timer.start("observation_ms")
        obs = self.observation_manager.compute(self)
        timer.stop("observation_ms")
        timer.start("metrics_ms")
        self.metric_manager.on_step(self, vel_err)
        if self.recorder_manager.terms:
            self.recorder_manager.record(self)
        timer.stop("metrics_ms")
        timer.stop("step_total_ms")
        timer.tick()
        self.obs = obs
        info = {"final_obs": final_obs}
        return obs, reward, terminated, truncated, info

    def flush_metrics(self) -> dict[str, float]:
        out = self.metric_manager.flush()  # one host sync
        out.update(self.timer.flush())
        out.update(self.curriculum_manager.state)
        return out

    def close(self) -> None:
        self.backend.close()

    # ---- internals -----------------------------------------------------------------
    def _check_action(self, action) -> None:
        if not isinstance(action, torch.Tensor):
            # One error type (ValueError) for every bad input, as the runner contract says.
            raise ValueError(f"action: expected a torch.Tensor, got {type(action).__name__}")  # noqa: TRY004
        if action.dtype != torch.float32:
            raise ValueError(f"action: expected dtype torch.float32, got {action.dtype}")
        if tuple(action.shape) != (self.num_envs, self.action_dim):
            raise ValueError(f"action: expected shape {(self.num_envs, self.action_dim)}, got {tuple(action.shape)}")
        if action.device != self.device:
            raise ValueError(f"action: expected device {self.device}, got {action.device}")
        if self.cfg.validate_actions and not bool(torch.isfinite(action).all()):
            raise ValueError("action: expected finite values, got NaN or inf (env state untouched)")

    def _velocity_error(self) -> torch.Tensor | None:
        cmds = self.command_manager.terms
        if not cmds:
            return None
        cmd = next(iter(cmds.values())).command
        r = self.robot
        err = cmd - torch.cat((r.root_lin_vel_b[:, :2], r.root_ang_vel_b[:, 2:]), dim=1)
        return torch.stack((torch.linalg.vector_norm(err[:, :2], dim=1).mean(), err[:, 2].abs().mean()))

    def _begin_reset(self, done: torch.Tensor, pushed: torch.Tensor | None, log: bool) -> StateTransaction:
        """Every manager's reset bookkeeping for the ``done`` rows, masked (no row list, so
        no host sync; on a DEVICE plane it queues behind physics), and the transaction's
        state filled by the events."""
        interval = self._no_rows_mask if pushed is None else pushed & ~done
        totals = self.reward_manager.reset(done)
        if log:
            fired = self.termination_manager.fired if self.termination_manager.terms else None
            self.metric_manager.on_reset(done, totals, self.episode_length, fired)
        self.termination_manager.reset(done)
        self.action_manager.reset(done)
        self.command_manager.reset(done)
        self.observation_manager.reset(done)
        self.episode_length.masked_fill_(done, 0)
        n = self.num_envs
        txn = StateTransaction(done, interval, self.default_qpos.expand(n, -1).clone(),
                               self.default_qvel.expand(n, -1).clone(), self.robot.qvel.clone())
        self.event_manager.apply(self, txn)
        return txn

    def _commit(self, txn: StateTransaction) -> None:
        """ONE ``set_state_where`` call for the rows that reset (their episode start) or were
        pushed (their edited velocities); no row list, so no host sync."""
        reset = txn.reset.unsqueeze(1)
        qpos = torch.where(reset, txn.reset_qpos, self.robot.qpos)
        qvel = torch.where(reset, txn.reset_qvel, txn.qvel)
        self.timer.start("reset_done_reset_call_ms")
        self.backend.set_state_where(txn.reset | txn.interval, qpos, qvel)
        self.timer.stop("reset_done_reset_call_ms")
        self.robot.invalidate()
        self.command_manager.refresh()
