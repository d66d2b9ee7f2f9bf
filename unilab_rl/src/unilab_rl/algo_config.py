"""Fields every off-policy algorithm config shares (the runner reads the schedule ones)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class OffPolicyConfig(BaseModel):
    """Schedule, replay and precision settings; algorithms subclass and add their own.

    ``changeable_on_resume``: the fields a resumed run may change, because the learner reads
    them where it uses them (or rebuilds what they size: the replay buffer refills after a
    resume) and the checkpoint's state does not override them. Every other field shapes
    networks or state saved in the checkpoint, so a resume refuses a change."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    changeable_on_resume: ClassVar[frozenset[str]] = frozenset({
        "batch_size", "updates_per_step", "learning_starts", "replay_capacity_per_env", "replay_obs_dtype",
        "learning_rate", "amp", "compile", "cuda_graph", "max_grad_norm", "target_tau", "symmetry_augmentation",
        "averaged_policy_tau"})

    gamma: float = Field(0.99, gt=0.0, le=1.0, description="discount per env step")
    n_step: int = Field(3, ge=1, description="rewards summed before bootstrapping")
    batch_size: int = Field(2048, ge=2, description="transitions per gradient update")
    updates_per_step: float = Field(
        2.0, gt=0.0, description="gradient updates per vectorized env step (fractions accumulate)"
    )
    learning_starts: int = Field(50_000, ge=0, description="transitions collected before the first update")
    replay_capacity_per_env: int = Field(2048, ge=4, description="ring length per env")
    replay_obs_dtype: Literal["float32", "bfloat16"] = "float32"
    learning_rate: float = Field(3e-4, gt=0.0)
    action_scale: float = Field(1.0, gt=0.0, description="policy output = action_scale * tanh(.)")
    amp: bool = Field(True, description="bf16 autocast for updates on CUDA (ignored on CPU)")
    compile: bool = Field(False, description="torch.compile the networks (FlashSAC: and their norm projection "
                          "after each optimizer step)")
    cuda_graph: bool = Field(
        True, description="replay each gradient update from a CUDA graph (CUDA only, ignored on CPU; "
        "a data-parallel run's gradient all-reduce is captured with it)")
    max_grad_norm: float = Field(0.0, ge=0.0, description="0 disables clipping")
    symmetry_augmentation: bool = Field(
        False, description="add the left-right mirrored copy of every sampled transition to each batch "
        "(doubling it); needs a task that declares its mirror (env.mirrors)")
    averaged_policy_tau: float = Field(
        0.0, ge=0.0, le=1.0, description="act deterministically (evaluation, play, export) with a Polyak "
        "average of the actor, moved this fraction toward it at every actor update; 0: the latest actor")

    def check_replay_holds_a_start(self, num_envs: int) -> None:
        """Refuse settings under which learning never starts: the first update waits for
        ``max(learning_starts, batch_size)`` transitions, and the replay holds ``num_envs x
        replay_capacity_per_env`` (a run at a few envs with the defaults would collect forever)."""
        capacity = num_envs * self.replay_capacity_per_env
        needed = max(self.learning_starts, self.batch_size)
        if needed > capacity:
            raise ValueError(
                f"learning_starts={self.learning_starts} and batch_size={self.batch_size} wait for {needed} "
                f"transitions, but the replay holds num_envs x replay_capacity_per_env = {num_envs} x "
                f"{self.replay_capacity_per_env} = {capacity}, so learning would never start; use more envs, a "
                f"larger replay_capacity_per_env or a smaller learning_starts / batch_size")
