"""FastSAC (holosoma / FastTD3 family): SAC with C51 critics, tuned for massively parallel sims.

Read top to bottom: config, acting, the critic update, the actor and temperature update,
checkpoint state. Its recipe: LayerNorm+SiLU MLPs (networks/mlp.py), running observation
normalization per group, a C51 critic ensemble whose target is the projected distribution of
the most pessimistic member, n-step returns, many updates per env step on large batches
(high update-to-data), AdamW with light weight decay, bf16 autocast on CUDA.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from pydantic import Field, model_validator

from unilab_rl.algo_config import OffPolicyConfig
from unilab_rl.contract import (
    CRITIC_GROUP,
    POLICY_GROUP,
    EnvSpec,
    Observation,
    ReplayBatch,
)
from unilab_rl.graphed_updates import uses_cuda_graphs
from unilab_rl.learner import (
    TEMPERATURE_METRICS,
    GradientHook,
    autocast_context,
    averaged_policy,
    deterministic_actor,
    frozen,
    load_sac_state_dict,
    optimizer_step,
    sac_state_dict,
    sac_update_graphs,
    scheduled_sac_update,
    target_network,
    temperature_step,
)
from unilab_rl.networks.distributional import pessimistic_soft_target
from unilab_rl.networks.mlp import CategoricalCriticEnsemble, GaussianActor
from unilab_rl.networks.squashed_gaussian import SquashedMeanPolicy, squashed_action, squashed_sample
from unilab_rl.normalizers import RunningMeanStd
from unilab_rl.symmetry import batch_mirrors


class FastSACConfig(OffPolicyConfig):
    changeable_on_resume: ClassVar[frozenset[str]] = OffPolicyConfig.changeable_on_resume | {"compile_losses"}

    gamma: float = Field(0.97, gt=0.0, le=1.0)
    batch_size: int = Field(8192, ge=2)
    updates_per_step: float = Field(8.0, gt=0.0)
    learning_starts: int = Field(40_960, ge=0)
    replay_capacity_per_env: int = Field(1024, ge=4)
    actor_width: int = Field(512, ge=16)
    critic_width: int = Field(768, ge=16)
    critic_ensemble: int = Field(2, ge=2)
    atoms: int = Field(101, ge=3)
    v_min: float = -20.0
    v_max: float = 20.0
    target_tau: float = Field(0.125, gt=0.0, le=1.0)
    policy_period: int = Field(4, ge=1, description="critic updates per actor/temperature update")
    initial_temperature: float = Field(0.001, gt=0.0)
    target_entropy_per_dim: float = Field(0.0, description="target entropy = action_dim * this")
    weight_decay: float = Field(1e-3, ge=0.0)
    normalize_observations: bool = True
    compile_losses: bool = Field(
        False, description="torch.compile each update's loss math (normalization, sampling, the C51 target "
        "and projection, the losses) around the networks, as one graph per loss with its backward")

    @model_validator(mode="after")
    def _support_is_an_interval(self) -> FastSACConfig:
        if self.v_max <= self.v_min:
            raise ValueError(f"v_max must exceed v_min, got [{self.v_min}, {self.v_max}]")
        return self


class FastSAC:
    """FastSAC learner and policy for one EnvSpec (actor reads "policy", critic "critic")."""

    name = "fastsac"
    # What ``update`` returns, once its actor has stepped (the runner logs each as loss/<name>).
    update_metrics = ("critic/loss", "critic/q_mean", "actor/loss", *TEMPERATURE_METRICS)

    def __init__(self, spec: EnvSpec, config: FastSACConfig, device: torch.device) -> None:
        self.config = config
        self.device = device
        self.gradient_hook: GradientHook | None = None
        actor_dim, critic_dim = spec.observation_spec[POLICY_GROUP], spec.observation_spec[CRITIC_GROUP]
        action_dim = spec.action_dim

        self.actor_obs_normalizer = RunningMeanStd(actor_dim).to(device)
        self.critic_obs_normalizer = RunningMeanStd(critic_dim).to(device)
        self.actor = GaussianActor(actor_dim, action_dim, config.actor_width).to(device)
        self.critic = CategoricalCriticEnsemble(
            critic_dim, action_dim, config.critic_width, config.critic_ensemble, config.atoms).to(device)
        self.target_critic = target_network(self.critic)
        self.averaged_actor = averaged_policy(self.actor, config.averaged_policy_tau)
        self.log_temperature = torch.tensor(math.log(config.initial_temperature), device=device, requires_grad=True)
        self.target_entropy = config.target_entropy_per_dim * action_dim
        self.support = torch.linspace(config.v_min, config.v_max, config.atoms, device=device)

        lr, decay = config.learning_rate, config.weight_decay
        fused = device.type == "cuda"  # one kernel per step instead of one per tensor
        capturable = uses_cuda_graphs(config.cuda_graph, device)  # optimizer steps a CUDA graph can replay
        self.actor_optimizer = torch.optim.AdamW(self.actor.parameters(), lr=lr, weight_decay=decay,
                                                 fused=fused, capturable=capturable)
        self.critic_optimizer = torch.optim.AdamW(self.critic.parameters(), lr=lr, weight_decay=decay,
                                                 fused=fused, capturable=capturable)
        self.temperature_optimizer = torch.optim.Adam([self.log_temperature], lr=lr, capturable=capturable)
        self.updates = 0
        self.mirrors = batch_mirrors(spec, config.symmetry_augmentation, "fastsac")
        self.update_graphs = sac_update_graphs(self, capturable)
        if config.compile:
            self.actor.compile()
            self.critic.compile()
            self.target_critic.compile()
        # The losses take their sampling noise as an input, so a compiled loss draws nothing
        # itself: it computes what the eager one computes from the same noise.
        self.critic_loss = torch.compile(self._critic_loss) if config.compile_losses else self._critic_loss
        self.actor_loss = torch.compile(self._actor_loss) if config.compile_losses else self._actor_loss

    def _actor_input(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor_obs_normalizer.normalize(obs) if self.config.normalize_observations else obs

    def _critic_input(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic_obs_normalizer.normalize(obs) if self.config.normalize_observations else obs

    # ---- acting -----------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool) -> torch.Tensor:
        actor = deterministic_actor(self) if deterministic else self.actor
        mean, log_std = actor(self._actor_input(obs[POLICY_GROUP]))
        if deterministic:
            return self.config.action_scale * torch.tanh(mean)
        return squashed_action(mean, log_std, torch.randn_like(mean), self.config.action_scale)

    def deterministic_policy(self) -> torch.nn.Module:
        """A frozen copy of what ``act(obs, deterministic=True)`` computes, as one module
        from raw "policy" observations to actions (for export)."""
        normalizer = self.actor_obs_normalizer if self.config.normalize_observations else None
        return SquashedMeanPolicy(deterministic_actor(self), self.config.action_scale, normalizer)

    @torch.no_grad()
    def observe(self, obs: Observation, reward: torch.Tensor, terminated: torch.Tensor,
                truncated: torch.Tensor) -> None:
        if self.config.normalize_observations:
            self.actor_obs_normalizer.update(obs[POLICY_GROUP])
            self.critic_obs_normalizer.update(obs[CRITIC_GROUP])

    # ---- learning ---------------------------------------------------------------------
    def update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        return scheduled_sac_update(self, batch, self.config.policy_period)

    def update_critic(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        noise = torch.randn_like(batch.action)
        critic_loss, q_mean = self.critic_loss(batch.obs[CRITIC_GROUP], batch.next_obs[CRITIC_GROUP],
                                               batch.next_obs[POLICY_GROUP], batch.action, batch.reward,
                                               batch.discount, noise)
        optimizer_step(self.critic_optimizer, critic_loss, self.gradient_hook, self.config.max_grad_norm)
        return {"critic/loss": critic_loss.detach(), "critic/q_mean": q_mean}

    def _critic_loss(self, critic_obs: torch.Tensor, next_critic_obs: torch.Tensor, next_policy_obs: torch.Tensor,
                     action: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor,
                     noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of the critics against the pessimistic soft target, and the mean Q."""
        cfg = self.config
        obs = self._critic_input(critic_obs)
        next_obs = self._critic_input(next_critic_obs)
        with autocast_context(self.device, cfg.amp):
            with torch.no_grad():
                next_mean, next_log_std = self.actor(self._actor_input(next_policy_obs))
                next_action, next_log_prob = squashed_sample(next_mean, next_log_std, noise, cfg.action_scale)
                next_probs = self.target_critic(next_obs, next_action).float().softmax(-1)  # (E, B, atoms)
                entropy_bonus = self.log_temperature.exp() * next_log_prob.float()
                target_probs = pessimistic_soft_target(next_probs, self.support, reward, discount,
                                                       entropy_bonus, cfg.v_min, cfg.v_max)
            log_probs = self.critic(obs, action).float().log_softmax(-1)
            critic_loss = -(target_probs[None] * log_probs).sum(-1).mean(-1).sum()
        q_mean = (log_probs.detach().exp() * self.support).sum(-1).mean()
        return critic_loss, q_mean

    def update_actor_and_temperature(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        noise = torch.randn_like(batch.action)
        with frozen(self.critic):
            actor_loss, log_prob = self.actor_loss(batch.obs[POLICY_GROUP], batch.obs[CRITIC_GROUP], noise)
        optimizer_step(self.actor_optimizer, actor_loss, self.gradient_hook, self.config.max_grad_norm)
        temperature_metrics = temperature_step(self.log_temperature, self.temperature_optimizer, log_prob,
                                               self.target_entropy, self.gradient_hook)
        return {"actor/loss": actor_loss.detach(), **temperature_metrics}

    def _actor_loss(self, policy_obs: torch.Tensor, critic_obs: torch.Tensor,
                    noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """SAC's actor loss on the ensemble-average Q (FastSAC), and the sampled actions' log-probability."""
        cfg = self.config
        with autocast_context(self.device, cfg.amp):
            mean, log_std = self.actor(self._actor_input(policy_obs))
            action, log_prob = squashed_sample(mean, log_std, noise, cfg.action_scale)
            logits = self.critic(self._critic_input(critic_obs), action).float()
            q = (logits.softmax(-1) * self.support).sum(-1).mean(0)
            temperature = self.log_temperature.exp().detach()
            actor_loss = (temperature * log_prob.float() - q).mean()
        return actor_loss, log_prob

    # ---- checkpoint state -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            **sac_state_dict(self),
            "actor_obs_normalizer": self.actor_obs_normalizer.state_dict(),
            "critic_obs_normalizer": self.critic_obs_normalizer.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_sac_state_dict(self, state)
        self.actor_obs_normalizer.load_state_dict(state["actor_obs_normalizer"])
        self.critic_obs_normalizer.load_state_dict(state["critic_obs_normalizer"])
