"""rsl_rl's ``VecEnv`` over any env under the env<->runner contract, so rsl_rl's PPO
(``OnPolicyRunner``) trains unilab tasks. rsl-rl-lib is an optional dependency
(``unilab-rl[ppo]``); nothing else in unilab_rl imports it.

The mapping follows the convention mjlab's and Isaac Lab's rsl_rl wrappers use:

- observations: the contract's groups as one ``TensorDict`` (``"policy"``, ``"critic"``); a
  runner config's ``obs_groups`` picks them, e.g. ``{"actor": ["policy"], "critic":
  ["critic"]}`` for the asymmetric actor-critic the tasks are written for;
- ``dones = terminated | truncated`` (long, as rsl_rl's storage expects); ``extras
  ["time_outs"] = truncated``: rsl_rl bootstraps a time-out by adding ``gamma * V(s_t)`` to
  its reward, ``s_t`` being the observation the action was taken in. The exact bootstrap
  target, the pre-reset final observation, is passed on as ``extras["final_obs"]`` (a
  ``TensorDict``; only done rows are meaningful) for a PPO that wants it; stock rsl_rl PPO
  does not read it;
- the env resets ended rows inside ``step`` and the returned observations are already
  post-reset, which is what rsl_rl expects; it never calls ``reset``, so the adapter resets
  once at construction;
- ``extras["log"]``: the env's ``info["log"]`` scalars every step, and every
  ``metrics_every`` steps the env's ``flush_metrics()`` under ``env/<name>`` (one host sync,
  so once per rollout is the natural period);
- ``episode_length_buf`` counts steps since each env's last episode end, for rsl_rl's
  bookkeeping. Writing it (``learn(init_at_random_ep_len=True)``) is refused: the contract
  gives a runner no way to move an env's episode clock, so the env's time-outs would not
  follow.
"""

from __future__ import annotations

from typing import Any

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from unilab_rl.contract import (
    INFO_FINAL_OBS,
    INFO_LOG,
    POLICY_GROUP,
    EnvSpec,
    Observation,
    RunnerEnv,
    check_step_output,
)
from unilab_rl.symmetry import with_reflection

__all__ = ["RslRlPolicy", "RslRlVecEnv", "mirror_augmentation"]


class RslRlVecEnv(VecEnv):
    """A ``RunnerEnv`` seen as rsl_rl's ``VecEnv``; ``clip_actions`` clamps actions to
    [-c, c] before the env sees them (rsl_rl's Gaussian actions are unbounded)."""

    def __init__(self, env: RunnerEnv, clip_actions: float | None = None, metrics_every: int = 0,
                 cfg: dict[str, Any] | None = None) -> None:
        if clip_actions is not None and not clip_actions > 0:
            raise ValueError(f"clip_actions: expected a float > 0 or None, got {clip_actions!r}")
        if metrics_every < 0:
            raise ValueError(f"metrics_every: expected an int >= 0, got {metrics_every!r}")
        self.env = env
        self.spec = EnvSpec.from_env(env)
        self.num_envs = self.spec.num_envs
        self.num_actions = self.spec.action_dim
        self.max_episode_length = self.spec.max_episode_length
        self.device = self.spec.device
        self.cfg = {"observation_spec": dict(self.spec.observation_spec), "action_dim": self.spec.action_dim,
                    "max_episode_length": self.spec.max_episode_length, "step_dt": self.spec.step_dt, **(cfg or {})}
        self.clip_actions = clip_actions
        self.metrics_every = metrics_every
        self.steps = 0
        self._episode_length = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self._obs = self._as_tensordict(env.reset())
        self._checked = False

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self._episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        raise ValueError("episode_length_buf cannot be written: the env<->runner contract has no way to move an "
                         "env's episode clock, so its time-outs would not follow; use "
                         "OnPolicyRunner.learn(..., init_at_random_ep_len=False)")

    def _as_tensordict(self, obs: Observation) -> TensorDict:
        return TensorDict(dict(obs), batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        if self.clip_actions is not None:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        output = self.env.step(actions)
        if not self._checked:  # the contract is checked on the first step only
            check_step_output(self.spec, output)
            self._checked = True
        obs, reward, terminated, truncated, info = output
        done = terminated | truncated
        self._episode_length += 1
        self._episode_length.masked_fill_(done, 0)
        self.steps += 1
        log = dict(info.get(INFO_LOG, {}))
        if self.metrics_every and self.steps % self.metrics_every == 0:
            log.update({f"env/{name}": value for name, value in self.env.flush_metrics().items()})
        extras = {"time_outs": truncated, INFO_FINAL_OBS: self._as_tensordict(info[INFO_FINAL_OBS]), "log": log}
        self._obs = self._as_tensordict(obs)
        return self._obs, reward, done.long(), extras

    def close(self) -> None:
        self.env.close()


def mirror_augmentation(env: RslRlVecEnv, obs: TensorDict | None = None,
                        actions: torch.Tensor | None = None) -> tuple[TensorDict | None, torch.Tensor | None]:
    """rsl_rl's symmetry ``data_augmentation_func`` from the task's own mirrors (``env.mirrors``,
    contract 1.2): each batch followed by its left-right reflection, for
    ``algorithm.symmetry_cfg={"use_data_augmentation": True, "data_augmentation_func": ...}``."""
    mirrors = env.spec.mirrors
    if mirrors is None:
        raise ValueError("mirror_augmentation: the task declares no left-right mirror (env.mirrors is None)")
    groups = mirrors["observations"]
    if obs is not None:
        obs = TensorDict({k: with_reflection(v, groups[k]) for k, v in obs.items()},
                         batch_size=[2 * obs.batch_size[0]], device=obs.device)
    if actions is not None:
        actions = with_reflection(actions, mirrors["action"])
    return obs, actions


class RslRlPolicy:
    """An rsl_rl actor (``OnPolicyRunner.get_inference_policy()``) as an agent with
    ``act(obs, deterministic)``, the interface ``unilab_rl.cli.play.run_episodes`` drives.
    ``deterministic=False`` samples from the actor's distribution; ``clip_actions`` as in
    ``RslRlVecEnv`` (the env is stepped directly, not through the adapter)."""

    def __init__(self, actor: torch.nn.Module, clip_actions: float | None = None) -> None:
        self.actor = actor
        self.clip_actions = clip_actions

    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool) -> torch.Tensor:
        batch = TensorDict(dict(obs), batch_size=[obs[POLICY_GROUP].shape[0]])
        actions = self.actor(batch, stochastic_output=not deterministic)
        if self.clip_actions is not None:
            actions = actions.clamp(-self.clip_actions, self.clip_actions)
        return actions
