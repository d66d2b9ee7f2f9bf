"""FlashSAC (Kim, Lee et al., arXiv 2604.04539): few large updates on big norm-bounded nets.

Read top to bottom: config, exploration (noise repetition), the critic update (distributional,
cross-batch normalized), the actor and temperature update, state for checkpoints.

What makes it FlashSAC rather than plain SAC:
- networks from networks/flash.py (BatchNorm pre-activation inverted residual blocks,
  post-RMSNorm, unit-norm weights re-projected after every optimizer step);
- a categorical critic ensemble over [-g_max, g_max] trained with cross-entropy, the min-Q
  member picked per sample for the target;
- cross-batch normalization: s and s' (with a and a') go through the critic as ONE batch so
  BatchNorm statistics are shared by the prediction and the bootstrap target;
- rewards divided by the running std of the discounted return (``ReturnScaler``), which keeps
  returns inside the critic's support without per-task reward tuning;
- learned temperature whose target entropy is that of a Gaussian with std ``target_std``;
- noise repetition: each env holds its exploration noise for a zeta-distributed number of
  steps (temporally correlated exploration, no extra networks);
- few updates per env step with large batches from a large GPU replay.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from pydantic import Field

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
    eval_mode,
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
from unilab_rl.networks.flash import (
    FlashActor,
    FlashCriticEnsemble,
    unit_norm_projection,
)
from unilab_rl.networks.squashed_gaussian import (
    SquashedMeanPolicy,
    gaussian_entropy_for_std,
    squashed_action,
    squashed_sample,
)
from unilab_rl.normalizers import ReturnScaler, restarted_return_state
from unilab_rl.symmetry import batch_mirrors


class FlashSACConfig(OffPolicyConfig):
    changeable_on_resume: ClassVar[frozenset[str]] = OffPolicyConfig.changeable_on_resume | {"compile_losses"}

    actor_width: int = Field(128, ge=4)
    actor_blocks: int = Field(2, ge=0)
    critic_width: int = Field(256, ge=4)
    critic_blocks: int = Field(2, ge=0)
    critic_ensemble: int = Field(2, ge=2)
    critic_bins: int = Field(101, ge=3)
    g_max: float = Field(5.0, gt=0.0, description="critic support is [-g_max, g_max] in scaled-return units")
    normalize_reward: bool = True
    target_tau: float = Field(0.01, gt=0.0, le=1.0)
    actor_update_period: int = Field(2, ge=1, description="critic updates per actor/temperature update")
    initial_temperature: float = Field(0.01, gt=0.0)
    target_std: float = Field(0.15, gt=0.0, description="target entropy = entropy of N(0, target_std^2) per dim")
    noise_repeat_exponent: float = Field(2.0, gt=0.0, description="zeta exponent of noise hold lengths")
    noise_repeat_max: int = Field(16, ge=1, description="longest noise hold, in env steps")
    compile_losses: bool = Field(
        False, description="torch.compile each update's loss math (the sampled actions, the cross-batch "
        "normalized critic passes, the categorical target and its projection, the losses) around the "
        "networks, as one graph per loss with its backward")


class FlashSAC:
    """FlashSAC learner and policy for one EnvSpec (actor reads "policy", critic "critic")."""

    name = "flashsac"
    # What ``update`` returns, once its actor has stepped (the runner logs each as loss/<name>).
    update_metrics = ("critic/loss", "critic/q_mean", "critic/reward_scale", "actor/loss", *TEMPERATURE_METRICS)

    def __init__(self, spec: EnvSpec, config: FlashSACConfig, device: torch.device) -> None:
        self.config = config
        self.device = device
        self.gradient_hook: GradientHook | None = None
        actor_dim, critic_dim = spec.observation_spec[POLICY_GROUP], spec.observation_spec[CRITIC_GROUP]
        action_dim = spec.action_dim

        self.actor = FlashActor(actor_dim, action_dim, config.actor_width, config.actor_blocks).to(device)
        self.critic = FlashCriticEnsemble(critic_dim, action_dim, config.critic_width, config.critic_blocks,
                                          config.critic_ensemble, config.critic_bins).to(device)
        self.target_critic = target_network(self.critic)
        self.averaged_actor = averaged_policy(self.actor, config.averaged_policy_tau)
        self.log_temperature = torch.tensor(math.log(config.initial_temperature), device=device, requires_grad=True)
        self.target_entropy = gaussian_entropy_for_std(action_dim, config.target_std, config.action_scale)
        self.support = torch.linspace(-config.g_max, config.g_max, config.critic_bins, device=device)
        self.return_scaler = ReturnScaler(spec.num_envs, config.gamma, config.g_max).to(device)

        lr = config.learning_rate
        fused = device.type == "cuda"  # one kernel per step instead of one per tensor
        capturable = uses_cuda_graphs(config.cuda_graph, device)  # optimizer steps a CUDA graph can replay
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=lr, fused=fused, capturable=capturable)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=lr, fused=fused, capturable=capturable)
        self.temperature_optimizer = torch.optim.Adam([self.log_temperature], lr=lr, capturable=capturable)
        self.updates = 0
        self.mirrors = batch_mirrors(spec, config.symmetry_augmentation, "flashsac")
        self.update_graphs = sac_update_graphs(self, capturable)

        # Noise repetition state, one hold per env.
        self.noise = torch.randn(spec.num_envs, action_dim, device=device)
        self.noise_age = torch.zeros(spec.num_envs, dtype=torch.long, device=device)
        self.noise_hold = torch.ones(spec.num_envs, dtype=torch.long, device=device)
        lengths = torch.arange(1, config.noise_repeat_max + 1, dtype=torch.float32, device=device)
        pmf = lengths.pow(-config.noise_repeat_exponent)
        self.noise_hold_cdf = (pmf / pmf.sum()).cumsum(0)

        if config.compile:
            self.actor.compile()
            self.critic.compile()
            self.target_critic.compile()
        self.project_actor = unit_norm_projection(self.actor, config.compile)
        self.project_critic = unit_norm_projection(self.critic, config.compile)
        # The losses take their sampling noise as an input, so a compiled loss draws nothing
        # itself: it computes what the eager one computes from the same noise.
        self.critic_loss = torch.compile(self._critic_loss) if config.compile_losses else self._critic_loss
        self.actor_loss = torch.compile(self._actor_loss) if config.compile_losses else self._actor_loss

    # ---- acting -----------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: Observation, deterministic: bool) -> torch.Tensor:
        actor = deterministic_actor(self) if deterministic else self.actor
        with eval_mode(actor):
            mean, log_std = actor(obs[POLICY_GROUP])
        if deterministic:
            return self.config.action_scale * torch.tanh(mean)
        self._redraw_noise(self.noise_age >= self.noise_hold)
        self.noise_age += 1
        return squashed_action(mean, log_std, self.noise, self.config.action_scale)

    def _redraw_noise(self, rows: torch.Tensor) -> None:
        # torch.where instead of boolean indexing: no host sync on the GPU.
        fresh = torch.randn_like(self.noise)
        self.noise = torch.where(rows[:, None], fresh, self.noise)
        draw = torch.rand(rows.shape[0], device=self.device)
        hold = torch.searchsorted(self.noise_hold_cdf, draw).clamp(max=self.config.noise_repeat_max - 1) + 1
        self.noise_hold = torch.where(rows, hold, self.noise_hold)
        self.noise_age = self.noise_age.masked_fill(rows, 0)  # one kernel: no zeros tensor to select from

    def deterministic_policy(self) -> torch.nn.Module:
        """A frozen copy of what ``act(obs, deterministic=True)`` computes, as one module
        from raw "policy" observations to actions (for export)."""
        return SquashedMeanPolicy(deterministic_actor(self), self.config.action_scale)

    @torch.no_grad()
    def observe(self, obs: Observation, reward: torch.Tensor, terminated: torch.Tensor,
                truncated: torch.Tensor) -> None:
        done = terminated | truncated
        self.return_scaler.update(reward, done)
        # A new episode starts with a fresh hold so episodes do not share noise.
        self.noise_age = torch.where(done, self.noise_hold, self.noise_age)

    # ---- learning ---------------------------------------------------------------------
    def update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        return scheduled_sac_update(self, batch, self.config.actor_update_period)

    def update_critic(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        cfg = self.config
        reward_scale = self.return_scaler.scale() if cfg.normalize_reward else torch.ones((), device=self.device)
        # The next actions' noise: the shape, dtype and device of the actor's float32 means.
        noise = torch.randn_like(batch.action)
        # Outside the loss, so a compiled loss sees one fixed module mode: the loss uses the
        # actor only for the next actions, in eval mode.
        with eval_mode(self.actor):
            critic_loss, q_mean = self.critic_loss(
                batch.obs[CRITIC_GROUP], batch.next_obs[CRITIC_GROUP], batch.next_obs[POLICY_GROUP], batch.action,
                batch.reward, batch.discount, reward_scale, noise)
        optimizer_step(self.critic_optimizer, critic_loss, self.gradient_hook, cfg.max_grad_norm)
        self.project_critic()
        return {"critic/loss": critic_loss.detach(), "critic/q_mean": q_mean * reward_scale,
                "critic/reward_scale": reward_scale.detach()}

    def _critic_loss(self, critic_obs: torch.Tensor, next_critic_obs: torch.Tensor, next_policy_obs: torch.Tensor,
                     action: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, reward_scale: torch.Tensor,
                     noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of the critics against the pessimistic soft target, and the mean Q in
        scaled-return units. The caller puts the actor in eval mode."""
        cfg = self.config
        reward = reward / reward_scale
        with autocast_context(self.device, cfg.amp):
            with torch.no_grad():
                next_mean, next_log_std = self.actor(next_policy_obs)
                next_action, next_log_prob = squashed_sample(next_mean, next_log_std, noise, cfg.action_scale)
                # Cross-batch normalization: (s, a) and (s', a') share one BatchNorm batch.
                target_logits = self.target_critic(
                    torch.cat([critic_obs, next_critic_obs]), torch.cat([action, next_action])).float()
                next_probs = target_logits[:, critic_obs.shape[0]:].softmax(-1)  # (E, B, bins)
                entropy_bonus = self.log_temperature.exp() * next_log_prob.float()
                target_probs = pessimistic_soft_target(next_probs, self.support, reward, discount,
                                                       entropy_bonus, -cfg.g_max, cfg.g_max)
            logits = self.critic(
                torch.cat([critic_obs, next_critic_obs]), torch.cat([action, next_action])).float()
            log_probs = logits[:, : critic_obs.shape[0]].log_softmax(-1)
            critic_loss = -(target_probs[None] * log_probs).sum(-1).mean(-1).sum()
        q_mean = (log_probs.detach().exp() * self.support).sum(-1).mean()
        return critic_loss, q_mean

    def update_actor_and_temperature(self, batch: ReplayBatch) -> dict[str, torch.Tensor]:
        noise = torch.randn_like(batch.action)
        # Outside the loss, so a compiled loss sees one fixed module mode: the loss uses the
        # critic only to score the sampled actions, frozen and in eval mode.
        with frozen(self.critic), eval_mode(self.critic):
            actor_loss, log_prob = self.actor_loss(
                batch.obs[POLICY_GROUP], batch.next_obs[POLICY_GROUP], batch.obs[CRITIC_GROUP], noise)
        optimizer_step(self.actor_optimizer, actor_loss, self.gradient_hook, self.config.max_grad_norm)
        self.project_actor()

        temperature_metrics = temperature_step(self.log_temperature, self.temperature_optimizer, log_prob,
                                               self.target_entropy, self.gradient_hook)
        return {"actor/loss": actor_loss.detach(), **temperature_metrics}

    def _actor_loss(self, policy_obs: torch.Tensor, next_policy_obs: torch.Tensor, critic_obs: torch.Tensor,
                    noise: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """SAC's actor loss on the ensemble-min Q, and the sampled actions' log-probability. The
        caller freezes the critic and puts it in eval mode."""
        cfg = self.config
        batch_size = policy_obs.shape[0]
        with autocast_context(self.device, cfg.amp):
            # The actor's BatchNorm sees s and s' together, as the critic's does.
            mean, log_std = self.actor(torch.cat([policy_obs, next_policy_obs]))
            action, log_prob = squashed_sample(mean[:batch_size], log_std[:batch_size], noise, cfg.action_scale)
            logits = self.critic(critic_obs, action).float()
            q = (logits.softmax(-1) * self.support).sum(-1).min(0).values
            temperature = self.log_temperature.exp().detach()
            actor_loss = (temperature * log_prob.float() - q).mean()
        return actor_loss, log_prob

    # ---- checkpoint state -------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            **sac_state_dict(self),
            "return_scaler": self.return_scaler.state_dict(),
            "noise": {"noise": self.noise, "age": self.noise_age, "hold": self.noise_hold},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        load_sac_state_dict(self, state)
        self.return_scaler.load_state_dict(restarted_return_state(state["return_scaler"], self.return_scaler))
        if state["noise"]["noise"].shape == self.noise.shape:  # play may use another num_envs
            self.noise = state["noise"]["noise"].to(self.device)
            self.noise_age = state["noise"]["age"].to(self.device)
            self.noise_hold = state["noise"]["hold"].to(self.device)
