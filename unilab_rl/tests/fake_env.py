"""A tiny contract-conforming env for unit tests of learner/runner logic (never shipped).

Each env is a point mass on a line that must reach a target: action = acceleration.
Terminated when it leaves [-limit, limit]; truncated at max_episode_length.
"""

from __future__ import annotations

from typing import Any

import torch


class PointMassEnv:
    def __init__(self, num_envs: int = 8, max_episode_length: int = 20, seed: int = 0,
                 nan_rows: tuple[int, ...] = (), nan_every: int = 0, limit: float = 3.0) -> None:
        self.num_envs = num_envs
        self.device = torch.device("cpu")
        self.observation_spec = {"policy": 3, "critic": 4}
        self.action_dim = 1
        self.max_episode_length = max_episode_length
        self.step_dt = 0.1
        self.metric_names = ("fake_phase_ms",)
        # The line reflected through 0: position, velocity, target and action change sign,
        # the episode time does not.
        sign = lambda *s: torch.tensor(s, dtype=torch.float32)
        self.mirrors = {"observations": {"policy": (torch.arange(3), sign(-1, -1, -1)),
                                         "critic": (torch.arange(4), sign(-1, -1, -1, 1))},
                        "action": (torch.arange(1), sign(-1))}
        self.generator = torch.Generator().manual_seed(seed)
        self.position = torch.zeros(num_envs)
        self.velocity = torch.zeros(num_envs)
        self.target = torch.zeros(num_envs)
        self.time = torch.zeros(num_envs, dtype=torch.long)
        self.nan_rows = list(nan_rows)
        self.nan_every = nan_every
        self.limit = limit
        self.steps = 0
        self.return_sum = 0.0
        self.episodes = 0
        self.closed = False
        self.altered_worlds = 0  # what simulator_diagnostics reports; a test may set it

    def _observe(self) -> dict[str, torch.Tensor]:
        policy = torch.stack([self.position, self.velocity, self.target], dim=-1)
        critic = torch.cat([policy, (self.time.float() / self.max_episode_length)[:, None]], dim=-1)
        return {"policy": policy.clone(), "critic": critic}

    def _reset_rows(self, rows: torch.Tensor) -> None:
        count = int(rows.sum())
        self.position[rows] = torch.rand(count, generator=self.generator) * 2 - 1
        self.velocity[rows] = 0.0
        self.target[rows] = torch.rand(count, generator=self.generator) * 2 - 1
        self.time[rows] = 0

    def reset(self) -> dict[str, torch.Tensor]:
        self._reset_rows(torch.ones(self.num_envs, dtype=torch.bool))
        return self._observe()

    def step(self, action: torch.Tensor) -> tuple[Any, ...]:
        self.steps += 1
        accel = action[:, 0].clamp(-1, 1)
        self.velocity = 0.9 * self.velocity + accel * self.step_dt * 5
        self.position = self.position + self.velocity * self.step_dt
        self.time += 1
        reward = 1.0 - (self.position - self.target).abs()
        terminated = self.position.abs() > self.limit
        truncated = (self.time >= self.max_episode_length) & ~terminated
        final_obs = self._observe()
        done = terminated | truncated
        self._reset_rows(done)
        obs = self._observe()
        if self.nan_every and self.steps % self.nan_every == 0:
            for row in self.nan_rows:
                obs["policy"][row, 0] = float("nan")
                reward[row] = float("nan")
        self.return_sum += float(reward.nan_to_num().sum())
        return obs, reward, terminated, truncated, {"final_obs": final_obs, "log": {"reward_mean": reward.nan_to_num().mean()}}

    def flush_metrics(self) -> dict[str, float]:
        return {"fake_phase_ms": 1.0}

    def simulator_diagnostics(self) -> dict[str, Any]:
        return {"steps": self.steps, "altered_worlds": self.altered_worlds}

    def training_state(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_training_state(self, state: dict[str, Any]) -> None:
        if set(state) != {"steps"}:
            raise ValueError(f"training state: expected the key 'steps', got {sorted(state)}")
        self.steps = state["steps"]

    def close(self) -> None:
        self.closed = True
