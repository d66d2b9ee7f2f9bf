"""60 seconds of CPU training on the real env (unilab, mujoco backend) must beat a random
policy. Runs in `make test-all` (marker: slow)."""

import pytest
import torch
from unilab_rl.cli.play import run_episodes
from unilab_rl.cli.train import main as train_main

unilab = pytest.importorskip("unilab")

SMOKE_SECONDS = 60
EVAL_EPISODES = 32


class UniformRandomPolicy:
    def __init__(self, action_dim: int, seed: int) -> None:
        self.action_dim = action_dim
        self.generator = torch.Generator().manual_seed(seed)

    def act(self, obs, deterministic):
        return torch.rand(obs["policy"].shape[0], self.action_dim, generator=self.generator) * 2 - 1


def evaluate(policy_factory):
    env = unilab.make_manager_based_rl_env("g1_walk_flat", backend="mujoco", num_envs=16, seed=123)
    try:
        return run_episodes(env, policy_factory(env), EVAL_EPISODES)
    finally:
        env.close()


# Per algorithm: overrides that fit 60 s on 2 CPU cores, and the return margin over random.
# FlashSAC with one update per step beat random at some seeds only (seed 0: -0.38 with height-proxy
# feet, -2.59 with contact-force feet, random -2.25; seed 1: -2.40 / -1.82); with two it cleared the
# bar at seeds 0, 1 and 2 (-0.19, -1.48, -1.39 with contact-force feet).
SMOKE_RUNS = {
    "fastsac": (["batch_size=512", "learning_starts=1024", "updates_per_step=2", "actor_width=128",
                 "critic_width=256"], 0.5),
    "flashsac": (["batch_size=256", "learning_starts=1024", "updates_per_step=2", "actor_width=64",
                  "critic_width=128"], 0.25),
}


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(SMOKE_RUNS))
def test_sixty_seconds_of_cpu_training_beats_a_random_policy(tmp_path, algo):
    from unilab_rl.checkpoint import load_checkpoint
    from unilab_rl.policy import load_policy

    overrides, margin = SMOKE_RUNS[algo]
    argv = ["--task", "g1_walk_flat", "--backend", "mujoco", "--algo", algo, "--num-envs", "32",
            "--seed", "0", "--minutes", str(SMOKE_SECONDS / 60), "--out", str(tmp_path / "run"), "--no-progress",
            "--no-tensorboard", "log_every=25", *overrides]
    assert train_main(argv) == 0
    document = load_checkpoint(tmp_path / "run" / "checkpoint.pt")

    trained = evaluate(lambda env: load_policy(document, env))
    random_policy = evaluate(lambda env: UniformRandomPolicy(env.action_dim, seed=0))
    print(f"{algo} trained {trained}\nrandom  {random_policy}")
    assert trained["return_mean"] > random_policy["return_mean"] + margin
