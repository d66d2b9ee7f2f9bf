"""The collector: one vectorized env step -> policy, env, quarantine, replay, statistics.

Everything stays on the env device; the only host syncs are the optional timing samples and
``flush()`` once per log interval.

Quarantine: a row whose reward, observation or final observation is non-finite is stored
with zeros and ``valid=False`` (the replay never samples it and cuts the n-step windows that
would read through it), its observation is zeroed before the policy sees it (so the row's
next step, which starts from those zeros, is stored invalid as well), and it is counted.
Dropping rows instead of the whole step keeps one broken env from stalling training.

Episode return and length are computed here, once, for any env under the contract (from the
rewards and done flags it returns); the env reports what its terms declare (``metric_names``).

Acting ahead (``set_act_ahead``): when the learner runs on a stream of its own
(unilab_rl.learner_stream), the collector computes the next step's action at the end of this
step, after waiting for the learner's last updates, so that the learner's next updates can
run while the next env step does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from unilab_rl.contract import (
    INFO_FINAL_OBS,
    INFO_LOG,
    EnvSpec,
    Observation,
    OffPolicyAgent,
    RunnerEnv,
    check_observation,
    check_step_output,
)
from unilab_rl.replay import ReplayBuffer
from unilab_rl.timing import SampledPhaseTimer

# What ``flush`` reports (the episode keys only for intervals in which episodes ended).
COLLECTOR_METRICS = ("collector/episodes", "collector/episode_return", "collector/episode_length",
                     "collector/episode_length_fraction", "collector/episode_failure_fraction",
                     "collector/quarantined_rows_total",
                     "collector/quarantined_steps_total")


class Collector:
    def __init__(self, env: RunnerEnv, spec: EnvSpec, agent: OffPolicyAgent,
                 replay: ReplayBuffer | None, timer: SampledPhaseTimer) -> None:
        self.env = env
        self.spec = spec
        self.agent = agent
        self.replay = replay
        self.timer = timer
        self.obs = env.reset()
        check_observation(spec, self.obs, "env.reset()")
        self.checked_first_step = False
        device = spec.device
        # Each env's running episode: return, length. Kept side by side so that one op updates,
        # sums and clears both: every op here is a kernel launch per env step on a GPU.
        self.episode = torch.zeros(spec.num_envs, 2, device=device)
        # Since the last flush, over the episodes that ended: return sum, length sum, episodes,
        # failures (ended by a termination, not a time-out).
        self.finished = torch.zeros(4, device=device)
        self.quarantined_rows = torch.zeros((), dtype=torch.long, device=device)
        self.quarantined_steps = torch.zeros((), dtype=torch.long, device=device)
        # False for rows whose current observation is the zeros a quarantine put in place of a
        # non-finite one: the next transition of such a row starts from no real state.
        self.obs_is_real = torch.ones(spec.num_envs, dtype=torch.bool, device=device)
        # A Python 0.0 in torch.where becomes a new device tensor, a fill kernel, on every call.
        self.zero = torch.zeros((), device=device)
        self.env_log_sums: dict[str, torch.Tensor] = {}
        self.env_log_count = 0
        self.steps = 0
        self.wait_for_learner: Callable[[], None] | None = None  # set: act ahead
        self.next_action: torch.Tensor | None = None

    def set_act_ahead(self, wait_for_learner: Callable[[], None] | None) -> None:
        """Act for the next step at the end of this one, after ``wait_for_learner()`` (None:
        act at the start of each step, with the weights of every update issued before it)."""
        self.wait_for_learner = wait_for_learner
        self.next_action = None

    def step(self, deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance every env once; returns (terminated, truncated) for callers that count episodes."""
        action, self.next_action = self.next_action, None
        if action is None:
            with self.timer.phase("policy"):
                action = self.agent.act(self.obs, deterministic=deterministic)
        with self.timer.phase("env_step"):
            output = self.env.step(action)
        if not self.checked_first_step:
            check_step_output(self.spec, output)
            self.checked_first_step = True
        next_obs, reward, terminated, truncated, info = output
        with self.timer.phase("replay"):
            final_obs: Observation = info[INFO_FINAL_OBS]
            finite = self._finite_rows(next_obs, reward, final_obs)
            reward = torch.where(finite, reward, self.zero)
            next_obs = {g: torch.where(finite[:, None], v, self.zero) for g, v in next_obs.items()}
            done = terminated | truncated
            bootstrap_obs = {
                g: torch.where((done & finite)[:, None], final_obs[g], next_obs[g]) for g in self.spec.observation_spec
            }
            if self.replay is not None:
                # A row that started from a quarantine's zeroed observation is stored invalid too:
                # (zeros, action, reward, next obs) is no transition the env made.
                self.replay.add(self.obs, action, reward, bootstrap_obs, terminated, truncated,
                                valid=finite & self.obs_is_real)
            self.obs_is_real = finite
            self._track_episodes(reward, done, terminated)
            self._accumulate_env_log(info.get(INFO_LOG))
            if self.wait_for_learner is not None:
                self.wait_for_learner()  # the agent's state is the learner's until its updates finish
            self.agent.observe(next_obs, reward, terminated, truncated)
        self.obs = next_obs
        if self.wait_for_learner is not None:
            with self.timer.phase("policy"):
                self.next_action = self.agent.act(next_obs, deterministic=deterministic)
        self.steps += 1
        self.timer.advance()
        return terminated, truncated

    def step_env_only(self, actions: Sequence[torch.Tensor]) -> None:
        """One env step per action in ``actions`` and nothing else: no policy, no replay, no
        statistics (what a benchmark times as the env alone, in the collector's process).
        Collection goes on from the state they leave; refused while acting ahead, whose next
        action was chosen for the observation these steps move past."""
        if self.next_action is not None:
            raise RuntimeError("step_env_only while acting ahead: switch overlap learning off first")
        if not actions:
            raise ValueError("step_env_only: actions must hold at least one action")
        for action in actions:
            obs = self.env.step(action)[0]
        if self.replay is not None:
            # The next stored step does not follow the newest stored one: no n-step window may
            # sum rewards across the steps taken here.
            self.replay.cut_chain(torch.ones(self.spec.num_envs, dtype=torch.bool, device=self.spec.device))
        self.obs_is_real = torch.ones_like(self.obs_is_real)
        # Copied once: an env stepping from CUDA graphs hands back the same buffers every step.
        self.obs = {group: value.clone() for group, value in obs.items()}

    def _finite_rows(self, obs: Observation, reward: torch.Tensor, final_obs: Observation) -> torch.Tensor:
        # A NaN or an infinity anywhere in a row makes the sum of the row's values NaN or infinite
        # (inf - inf is NaN), and x - x is 0 only for a finite x: one sum per tensor and one test,
        # where isfinite(x).all(-1) dispatches five ops per tensor (abs, ne, eq, mul, all). A row
        # of finite values whose sum overflows float32 (3.4e38) would be quarantined too.
        total = reward
        for group in self.spec.observation_spec:
            total = total + obs[group].sum(-1) + final_obs[group].sum(-1)
        bad = (total - total) != 0
        bad_rows = bad.sum()
        self.quarantined_rows += bad_rows
        self.quarantined_steps += bad_rows.clamp(max=1)
        return ~bad

    def _track_episodes(self, reward: torch.Tensor, done: torch.Tensor, terminated: torch.Tensor) -> None:
        # add_ on the views: ``view += x`` would copy the view back onto itself (one more op).
        self.episode[:, 0].add_(reward)
        self.episode[:, 1].add_(1.0)
        done_f = done.float()
        self.finished[:2].add_((self.episode * done_f[:, None]).sum(0))
        self.finished[2].add_(done_f.sum())
        self.finished[3].add_(terminated.sum())
        self.episode.mul_((1.0 - done_f)[:, None])

    def _accumulate_env_log(self, log: dict[str, torch.Tensor] | None) -> None:
        if not log:
            return
        for key, value in log.items():
            self.env_log_sums[key] = self.env_log_sums.get(key, 0.0) + value.detach().float()
        self.env_log_count += 1

    def flush(self) -> dict[str, float]:
        """Host-side statistics since the last flush (one device sync)."""
        values = torch.cat([self.finished, self.quarantined_rows.float()[None],
                            self.quarantined_steps.float()[None]]).tolist()
        return_sum, length_sum, episodes, failures, bad_rows, bad_steps = values
        stats = {"collector/quarantined_rows_total": bad_rows, "collector/quarantined_steps_total": bad_steps,
                 "collector/episodes": episodes}
        if episodes > 0:
            stats["collector/episode_return"] = return_sum / episodes
            stats["collector/episode_length"] = length_sum / episodes
            stats["collector/episode_length_fraction"] = length_sum / episodes / self.spec.max_episode_length
            # Tasks whose episodes end early by design (a tracking clip's end is a time-out) judge
            # survival by this, not by the length fraction.
            stats["collector/episode_failure_fraction"] = failures / episodes
        for key, total in self.env_log_sums.items():
            stats[f"env_log/{key}"] = float(total) / max(self.env_log_count, 1)
        self.finished.zero_()
        self.env_log_sums.clear()
        self.env_log_count = 0
        return stats
