"""Env <-> runner contract v1: everything a runner may assume about a training environment.

The unilab Manager runtime provides it (``unilab.make_manager_based_rl_env``); the runners,
replay and algorithms in this package consume it and never import unilab. The machine-readable
manifest is contracts/env_runner/v1.json; tests/test_contract_manifest.py fails when the
Protocols below and that manifest drift apart without a version bump.

Semantics in one place (the manifest repeats them per member):

- Observations are a dict of groups, each ``(num_envs, dim)`` float32 on ``env.device``. The
  group ``"policy"`` feeds the actor, ``"critic"`` the critic (asymmetric actor-critic).
- ``step(action)`` takes ``(num_envs, action_dim)`` float32 (nominally in [-1, 1], unbounded).
- ``terminated`` = the MDP ended (fall): no bootstrap. ``truncated`` = time-out or other cut
  that is not an MDP end: bootstrap from the final observation.
- Envs that ended are reset inside ``step``; the returned obs is already post-reset. The
  pre-reset final observation of those rows is in ``info["final_obs"]`` (full-size groups,
  only the done rows are meaningful).
- ``info["log"]`` (optional): dict of on-device scalar tensors, read at most once per log
  interval. ``flush_metrics()`` is the one host sync per interval; ``metric_names`` (1.1) are
  the names it reports, declared by the env's task, so a runner can show and check them
  without knowing any task.
- ``mirrors`` (1.2): the task's left-right reflection, or None when it declares none:
  ``{"observations": {group: (index, sign)}, "action": (index, sign)}``, each a signed
  permutation of columns (``mirrored[:, i] = sign[i] * x[:, index[i]]``, int64 and float32
  tensors on ``env.device``) that undoes itself. A learner may add mirrored copies of its
  transitions (same reward and discount) to its batches; the env never applies them.
- ``simulator_diagnostics()`` (1.3): plain-Python facts about the simulator behind the env
  (step counts, buffer sizes, buffer overflows; the keys are the simulator adapter's own), always
  with ``altered_worlds``: how many worlds' physics the simulator changed on its own during the
  run (contacts dropped for a full buffer, a world restarted for an unstable state), an int, or
  None where it cannot tell. It may synchronize with the device: read it at the end of a run,
  never per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

ENV_RUNNER_CONTRACT_VERSION = "1.4.0"

__all__ = [
    "CRITIC_GROUP", "ENV_RUNNER_CONTRACT_VERSION", "INFO_FINAL_OBS", "INFO_LOG", "POLICY_GROUP", "REQUIRED_GROUPS",
    "ContractViolation", "EnvFactory", "EnvSpec", "OffPolicyAgent", "ReplayBatch", "RunnerEnv",
    "check_observation", "check_step_output",
]

POLICY_GROUP = "policy"
CRITIC_GROUP = "critic"
REQUIRED_GROUPS = (POLICY_GROUP, CRITIC_GROUP)
INFO_FINAL_OBS = "final_obs"
INFO_LOG = "log"

Observation = dict[str, torch.Tensor]
StepOutput = tuple[Observation, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]


class ContractViolation(ValueError):
    """An env (or agent) broke the env<->runner contract; the message names the member."""


@runtime_checkable
class RunnerEnv(Protocol):
    """What a runner needs from a batched training environment."""

    num_envs: int
    device: torch.device
    observation_spec: dict[str, int]
    action_dim: int
    max_episode_length: int
    step_dt: float
    metric_names: tuple[str, ...]
    mirrors: dict[str, Any] | None

    def reset(self) -> Observation: ...

    def step(self, action: torch.Tensor) -> StepOutput: ...

    def flush_metrics(self) -> dict[str, float]: ...

    def simulator_diagnostics(self) -> dict[str, Any]: ...

    def training_state(self) -> dict[str, Any]: ...

    def load_training_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class EnvFactory(Protocol):
    """The one injected dependency: builds a RunnerEnv (unilab.make_manager_based_rl_env)."""

    def __call__(
        self,
        task: str,
        *,
        backend: str,
        num_envs: int,
        device: str | torch.device | None,
        seed: int,
        overrides: dict[str, str],
    ) -> RunnerEnv: ...


@dataclass(frozen=True)
class ReplayBatch:
    """A sampled n-step transition batch; target = reward + discount * V(next_obs).

    ``discount`` already folds in gamma**k (k = rewards summed) and is 0 where an episode
    terminated inside the n-step window; time-outs keep their discount (bootstrap).
    """

    obs: Observation
    action: torch.Tensor
    reward: torch.Tensor
    discount: torch.Tensor
    next_obs: Observation


@runtime_checkable
class OffPolicyAgent(Protocol):
    """What the runner needs from an algorithm (FlashSAC, FastSAC).

    ``update`` is one learner step as a plain method so a data-parallel wrapper can average
    gradients through ``gradient_hook`` (called after backward, before each optimizer step).
    """

    def act(self, obs: Observation, deterministic: bool) -> torch.Tensor: ...

    def observe(
        self, obs: Observation, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
    ) -> None: ...

    def update(self, batch: ReplayBatch) -> dict[str, torch.Tensor]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class EnvSpec:
    """The static facts of an env, read once and validated, then passed to algorithms."""

    num_envs: int
    device: torch.device
    observation_spec: dict[str, int]
    action_dim: int
    max_episode_length: int
    step_dt: float
    metric_names: tuple[str, ...] = ()
    mirrors: dict[str, Any] | None = None

    @classmethod
    def from_env(cls, env: RunnerEnv) -> EnvSpec:
        if not hasattr(env, "mirrors"):  # an env written against contract 1.1
            raise ContractViolation("env.mirrors: missing; since contract 1.2 an env says None when its task "
                                    "declares no left-right mirror")
        spec = cls(
            num_envs=env.num_envs,
            device=torch.device(env.device),
            observation_spec=dict(env.observation_spec),
            action_dim=env.action_dim,
            max_episode_length=env.max_episode_length,
            step_dt=env.step_dt,
            metric_names=tuple(env.metric_names),
            mirrors=env.mirrors,
        )
        spec.validate()
        return spec

    def validate(self) -> None:
        for name in ("num_envs", "action_dim", "max_episode_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ContractViolation(f"env.{name}: expected an int >= 1, got {value!r}")
        if not (isinstance(self.step_dt, float | int) and self.step_dt > 0):
            raise ContractViolation(f"env.step_dt: expected a float > 0, got {self.step_dt!r}")
        if not all(isinstance(n, str) and n for n in self.metric_names):
            raise ContractViolation(f"env.metric_names: expected non-empty strings, got {self.metric_names!r}")
        missing = [g for g in REQUIRED_GROUPS if g not in self.observation_spec]
        if missing:
            raise ContractViolation(
                f"env.observation_spec: missing groups {missing}; has {sorted(self.observation_spec)}"
            )
        for group, dim in self.observation_spec.items():
            if not isinstance(dim, int) or dim < 1:
                raise ContractViolation(f"env.observation_spec[{group!r}]: expected an int >= 1, got {dim!r}")
        if self.mirrors is not None:
            self._validate_mirrors()

    def _validate_mirrors(self) -> None:
        mirrors = self.mirrors
        if not isinstance(mirrors, dict) or set(mirrors) != {"observations", "action"} \
                or not isinstance(mirrors["observations"], dict):
            raise ContractViolation("env.mirrors: expected None or {'observations': {group: (index, sign)}, "
                                    f"'action': (index, sign)}}, got {type(mirrors).__name__}")
        widths = {**{f"observations[{g!r}]": d for g, d in self.observation_spec.items()}, "action": self.action_dim}
        pairs = {**{f"observations[{g!r}]": p for g, p in mirrors["observations"].items()}, "action": mirrors["action"]}
        if set(pairs) != set(widths):
            raise ContractViolation(f"env.mirrors: covers {sorted(pairs)}, the env has {sorted(widths)}")
        for where, pair in pairs.items():
            index, sign = pair
            _check_tensor(f"env.mirrors {where} index", index, torch.int64, (widths[where],), self.device)
            _check_tensor(f"env.mirrors {where} sign", sign, torch.float32, (widths[where],), self.device)
            # Reflecting twice must give the input back: a mirrored copy of a mirrored sample is
            # the sample, which is what makes the augmented data a symmetry of the task's MDP.
            columns = torch.arange(widths[where], device=index.device)
            in_range = bool(((index >= 0) & (index < widths[where])).all())
            if not in_range or not torch.equal(index[index], columns) or not torch.equal(sign * sign[index],
                                                                                         torch.ones_like(sign)):
                raise ContractViolation(f"env.mirrors {where}: expected a reflection that undoes itself (index a "
                                        "permutation with index[index] == arange, sign * sign[index] == 1)")


def check_observation(spec: EnvSpec, obs: Any, where: str) -> None:
    """Raise ContractViolation unless ``obs`` has every group at (num_envs, dim) float32."""
    if not isinstance(obs, dict):
        raise ContractViolation(f"{where}: expected a dict of observation groups, got {type(obs).__name__}")
    for group, dim in spec.observation_spec.items():
        if group not in obs:
            raise ContractViolation(f"{where}: missing group {group!r}; has {sorted(obs)}")
        _check_tensor(f"{where}[{group!r}]", obs[group], torch.float32, (spec.num_envs, dim), spec.device)


def check_step_output(spec: EnvSpec, output: Any) -> None:
    """Check one ``env.step`` result against the contract (used on the first step only)."""
    if not isinstance(output, tuple) or len(output) != 5:
        raise ContractViolation("env.step: expected (obs, reward, terminated, truncated, info)")
    obs, reward, terminated, truncated, info = output
    check_observation(spec, obs, "env.step obs")
    _check_tensor("env.step reward", reward, torch.float32, (spec.num_envs,), spec.device)
    _check_tensor("env.step terminated", terminated, torch.bool, (spec.num_envs,), spec.device)
    _check_tensor("env.step truncated", truncated, torch.bool, (spec.num_envs,), spec.device)
    if not isinstance(info, dict) or INFO_FINAL_OBS not in info:
        raise ContractViolation(f"env.step info: expected a dict with {INFO_FINAL_OBS!r}")
    check_observation(spec, info[INFO_FINAL_OBS], f"env.step info[{INFO_FINAL_OBS!r}]")
    log = info.get(INFO_LOG, {})
    if not isinstance(log, dict):
        raise ContractViolation(f"env.step info[{INFO_LOG!r}]: expected a dict of scalar tensors")


def _check_tensor(
    where: str, value: Any, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device
) -> None:
    if not isinstance(value, torch.Tensor):
        raise ContractViolation(f"{where}: expected a torch.Tensor, got {type(value).__name__}")
    if value.dtype != dtype or tuple(value.shape) != shape:
        raise ContractViolation(
            f"{where}: expected {dtype} {shape}, got {value.dtype} {tuple(value.shape)}"
        )
    if value.device.type != device.type:
        raise ContractViolation(f"{where}: expected device {device}, got {value.device}")
