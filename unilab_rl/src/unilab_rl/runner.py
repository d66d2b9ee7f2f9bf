"""The off-policy runner: collect, learn, log, checkpoint; stop on budget or on request.

It is handed an env (anything satisfying ``contract.RunnerEnv``) and a learner; it never
builds either, which keeps it testable with a fake env and free of unilab imports.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from unilab_rl.algo_config import OffPolicyConfig
from unilab_rl.checkpoint import (
    ENV_STATE_KEY,
    CheckpointError,
    NonFiniteState,
    capture_rng_state,
    restore_rng_state,
    save_checkpoint,
)
from unilab_rl.collector import Collector
from unilab_rl.contract import EnvSpec, OffPolicyAgent, RunnerEnv
from unilab_rl.learner_stream import LearnerStream
from unilab_rl.replay import ReplayBuffer
from unilab_rl.runner_config import RunnerConfig
from unilab_rl.snapshot_names import snapshot_name, step_snapshot_name
from unilab_rl.timing import SampledPhaseTimer

LOSS_METRIC_PREFIX = "loss/"  # before each name an update returns, in the logged metrics
TIMED_PHASES = ("policy", "env_step", "replay", "learner")  # the collector's and the learner's: perf/<phase>_ms


class LearnerDiverged(RuntimeError):
    """A loss became NaN or inf: the learner's weights are no longer usable."""


class EnvProducedNothing(RuntimeError):
    """Every transition of a log interval was quarantined (non-finite observations or
    rewards): the learner would train on nothing."""


@dataclass(frozen=True)
class RunIdentity:
    """What a checkpoint must carry to rebuild the same env and learner."""

    task: str
    backend: str
    algo: str
    seed: int
    env_overrides: dict[str, str] = field(default_factory=dict)


class MetricsSink(Protocol):
    def write(self, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None: ...

    def close(self) -> None: ...


@dataclass
class TrainResult:
    env_steps: int
    updates: int
    wall_s: float
    interrupted: bool
    last_metrics: dict[str, float]
    checkpoint: Path | None
    # Seconds into this session when the first env step that ran updates had been issued: the
    # learner's first compiles run there (its graph captures in the next few steps), so on a
    # machine with cold caches this is where a time budget goes before learning runs at speed.
    # None: no update ran.
    first_learning_s: float | None = None


class OffPolicyRunner:
    def __init__(self, env: RunnerEnv, agent: OffPolicyAgent, algo_config: OffPolicyConfig,
                 identity: RunIdentity, out_dir: Path | None, sink: MetricsSink | None = None,
                 runner_config: RunnerConfig | None = None) -> None:
        self.env = env
        self.spec = EnvSpec.from_env(env)
        self.agent = agent
        self.algo_config = algo_config
        self.identity = identity
        self.out_dir = out_dir
        self.sink = sink
        self.config = runner_config or RunnerConfig()
        algo_config.check_replay_holds_a_start(self.spec.num_envs)
        self.timer = SampledPhaseTimer(self.spec.device, self.config.timing_sample_every)
        obs_dtype = torch.bfloat16 if algo_config.replay_obs_dtype == "bfloat16" else torch.float32
        self.replay = ReplayBuffer(
            self.spec.num_envs, algo_config.replay_capacity_per_env, self.spec.observation_spec,
            self.spec.action_dim, algo_config.n_step, algo_config.gamma, self.spec.device, obs_dtype)
        self.collector = Collector(env, self.spec, agent, self.replay, self.timer)
        self.learner_stream: LearnerStream | None = None
        self.set_overlap_learning(self.config.overlap_learning)
        self.env_steps = 0  # transitions, summed over envs
        self.iterations = 0  # vectorized env steps
        self.updates = 0
        self.update_credit = 0.0
        self.quarantined_rows_seen = 0.0  # the collector's running total at the last log interval
        self.elapsed_before_resume_s = 0.0
        self.session_started_at: float | None = None
        self.stop_requested = False
        # Data-parallel seam: ranks must stop on the same iteration or a gradient
        # all-reduce would wait forever. Called once per iteration with this process's wish to
        # stop (time budget or request); a wrapper installs e.g. an all-reduce(MAX) of the flag.
        self.stop_consensus: Callable[[bool], bool] | None = None
        self.update_sums: dict[str, torch.Tensor] = {}
        self.update_count = 0
        # What the last checkpoint this process wrote holds, so a divergence can say it.
        self.last_saved: tuple[Path, int] | None = None
        self.resumed_from_env_steps: int | None = None

    # ---- control ------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the loop to checkpoint and return at the next step (SIGINT handler calls this)."""
        self.stop_requested = True

    def train(self, max_env_steps: int | None = None, max_seconds: float | None = None,
              progress: bool = False) -> TrainResult:
        if max_env_steps is None and max_seconds is None:
            raise ValueError("give a budget: max_env_steps or max_seconds")
        # A resumed run kept the times and counts it had passed in its earlier sessions (a new
        # session's clock would otherwise write them again, over the earlier snapshots).
        trained_before_s = self.elapsed_before_resume_s
        snapshots_due = [t for t in self.config.snapshot_at_s if t > trained_before_s]
        if snapshots_due and self.out_dir is None:
            raise ValueError("runner.snapshot_at_s: snapshots need an output directory (--out)")
        step_snapshots_due = [n for n in self.config.snapshot_at_steps if n > self.env_steps]
        if step_snapshots_due and self.out_dir is None:
            raise ValueError("runner.snapshot_at_steps: snapshots need an output directory (--out)")
        bar = self._progress_bar(max_env_steps, max_seconds) if progress else None
        start = time.perf_counter()
        self.session_started_at = start
        interval_start, interval_steps = start, 0
        last_metrics: dict[str, float] = {}
        interrupted = False
        updates_before, first_learning_s = self.updates, None
        while True:
            # A step budget runs out on the same iteration everywhere; time and Ctrl-C are
            # this process's own view, which data-parallel ranks must agree on first.
            steps_spent = max_env_steps is not None and self.env_steps >= max_env_steps
            time_spent = max_seconds is not None and time.perf_counter() - start >= max_seconds
            stop = time_spent or self.stop_requested
            if self.stop_consensus is not None:
                stop = self.stop_consensus(stop)
            if steps_spent or stop:
                # A rank stopped by a peer's time budget finished its run; only a request interrupts.
                interrupted = self.stop_requested and not (steps_spent or time_spent)
                break
            self.collect_and_learn()
            if first_learning_s is None and self.updates != updates_before:  # host counters: no sync
                first_learning_s = time.perf_counter() - start
            self.env_steps += self.spec.num_envs
            self.iterations += 1
            interval_steps += self.spec.num_envs
            if self.iterations % self.config.log_every == 0:
                now = time.perf_counter()
                last_metrics = self._flush(interval_steps / max(now - interval_start, 1e-9), interval_steps)
                self._emit(last_metrics, now - start)
                interval_start, interval_steps = now, 0
                if bar is not None:
                    self._advance_bar(bar, last_metrics, now - start, max_seconds)
            if self.out_dir is not None and self.iterations % self.config.checkpoint_every == 0:
                self.save(self.out_dir / "checkpoint.pt")
            while snapshots_due and trained_before_s + time.perf_counter() - start >= snapshots_due[0]:
                self.save(self.out_dir / snapshot_name(snapshots_due.pop(0)))
            while step_snapshots_due and self.env_steps >= step_snapshots_due[0]:
                self.save(self.out_dir / step_snapshot_name(step_snapshots_due.pop(0)))
        self.join_learner()
        wall_s = time.perf_counter() - start
        if interval_steps:
            last_metrics = self._flush(interval_steps / max(time.perf_counter() - interval_start, 1e-9),
                                       interval_steps)
            self._emit(last_metrics, wall_s)
        if bar is not None:  # closed where the run ended: full on its budget, else at the reached fraction
            self._close_bar(bar, wall_s, max_seconds, interrupted)
        checkpoint = None
        if self.out_dir is not None:
            checkpoint = self.out_dir / "checkpoint.pt"
            self.save(checkpoint)
        self.elapsed_before_resume_s += time.perf_counter() - start
        self.session_started_at = None
        return TrainResult(self.env_steps, self.updates, wall_s, interrupted, last_metrics, checkpoint,
                           first_learning_s)

    # ---- learning -------------------------------------------------------------------------
    def set_overlap_learning(self, enabled: bool) -> None:
        """Learn beside collection (unilab_rl.learner_stream) or after each env step; may be
        switched between steps (the collector benchmark times both in one process)."""
        stream = (LearnerStream(self.spec.device, self.config.env_stream_priority)  # refuses a non-CUDA device
                  if enabled else None)
        self.join_learner()
        self.learner_stream = stream
        self.collector.set_act_ahead(stream.wait_for_updates if stream is not None else None)
        self.config.overlap_learning = enabled

    def join_learner(self) -> None:
        """Order what follows on the current stream after every update issued so far."""
        if self.learner_stream is not None:
            self.learner_stream.join()

    def collect_and_learn(self, learn: bool = True) -> None:
        """One collector step, then (``learn``) the updates it earned."""
        collecting = self.learner_stream.collecting() if self.learner_stream is not None else nullcontext()
        with collecting:
            self.collector.step()
            if learn:
                self.learn()

    def learn(self) -> None:
        """Run the gradient updates this env step has earned (none before learning_starts)."""
        if len(self.replay) < max(self.algo_config.learning_starts, self.algo_config.batch_size):
            return
        self.update_credit += self.algo_config.updates_per_step
        if self.learner_stream is None:
            with self.timer.phase("learner"):
                self._updates(exclude_next_write=False)
        else:  # timed on the learner's stream, where the updates run
            with self.learner_stream.updates(), self.timer.phase("learner"):
                self._updates(exclude_next_write=True)

    def _updates(self, exclude_next_write: bool) -> None:
        count = int(self.update_credit)
        if count == 0:
            return
        # One draw for the step's updates: a draw's GPU cost is its op count, not its size.
        for batch in self.replay.sample_batches(self.algo_config.batch_size, count,
                                                exclude_next_write=exclude_next_write):
            for key, value in self.agent.update(batch).items():
                # Summed in place, never rebound: a rebound sum frees its predecessor on the host
                # as soon as the add is issued, before the stream that adds has read it. A sum
                # allocated on the other stream (pending when set_overlap_learning switched the
                # stream the updates run on) would go straight back to that stream's caching
                # allocator, whose next tensor (an env step's, running beside the updates) could
                # overwrite it before the add runs. The first sum is a copy: a graphed update's
                # metrics are its output buffers, overwritten by its next replay.
                total = self.update_sums.get(key)
                if total is None:
                    self.update_sums[key] = value.detach().to(torch.float32, copy=True)
                else:
                    total.add_(value)
        self.update_count += count
        self.updates += count
        self.update_credit -= count

    # ---- logging --------------------------------------------------------------------------
    def _flush(self, steps_per_s: float, interval_rows: int = 0) -> dict[str, float]:
        self.join_learner()  # the loss sums are the learner stream's
        metrics: dict[str, float] = {"perf/env_steps_per_s": steps_per_s, "progress/updates": float(self.updates),
                                     "progress/replay_transitions": float(len(self.replay))}
        metrics.update(self.collector.flush())
        metrics.update({f"perf/{k}": v for k, v in self.timer.flush().items()})
        if self.update_count:
            sums = self._checked_update_sums()
            metrics.update({f"{LOSS_METRIC_PREFIX}{n}": total / self.update_count for n, total in sums.items()})
            self.update_sums.clear()
            self.update_count = 0
        metrics.update({f"env/{k}": float(v) for k, v in self.env.flush_metrics().items()})
        self._check_not_all_quarantined(metrics, interval_rows)
        return metrics

    def _check_not_all_quarantined(self, metrics: dict[str, float], interval_rows: int) -> None:
        """Stop when the env produced no usable transition over a whole log interval, naming the
        env's metrics that were not finite (a reward term's, an observation's)."""
        total = metrics.get("collector/quarantined_rows_total", 0.0)
        new, self.quarantined_rows_seen = total - self.quarantined_rows_seen, total
        if interval_rows <= 0 or new < interval_rows:
            return
        culprits = sorted(k for k, v in metrics.items() if not math.isfinite(v))
        named = f"non-finite metrics: {', '.join(culprits[:8])}" if culprits else "no logged metric was non-finite"
        raise EnvProducedNothing(
            f"all {interval_rows} transitions of the last log interval (env step {self.env_steps}) were quarantined "
            f"for non-finite observations or rewards ({named}); check the task's terms and overrides")

    def _emit(self, metrics: dict[str, float], wall_s: float) -> None:
        if self.sink is not None:
            self.sink.write(self.env_steps, self.elapsed_before_resume_s + wall_s, metrics)

    @staticmethod
    def _progress_bar(max_env_steps: int | None, max_seconds: float | None) -> Any:
        from tqdm import tqdm  # only the interactive path needs it

        if max_env_steps is not None:
            return tqdm(total=max_env_steps, unit="step", unit_scale=True, dynamic_ncols=True)
        return tqdm(total=math.ceil(max_seconds or 0), unit="s", dynamic_ncols=True)

    def _advance_bar(self, bar: Any, metrics: dict[str, float], elapsed: float, max_seconds: float | None) -> None:
        bar.n = min(self.env_steps, bar.total) if max_seconds is None else min(int(elapsed), bar.total)
        postfix = {"steps/s": f"{metrics['perf/env_steps_per_s']:.0f}"}
        if "collector/episode_return" in metrics:
            postfix["return"] = f"{metrics['collector/episode_return']:.2f}"
            postfix["ep_len"] = f"{metrics['collector/episode_length']:.0f}"
        bar.set_postfix(postfix, refresh=False)
        bar.refresh()

    def _close_bar(self, bar: Any, wall_s: float, max_seconds: float | None, interrupted: bool) -> None:
        reached = self.env_steps if max_seconds is None else int(wall_s)
        bar.n = bar.total if not interrupted else min(reached, bar.total)
        if interrupted:
            bar.set_description("interrupted", refresh=False)
        bar.refresh()
        bar.close()

    # ---- checkpoints ----------------------------------------------------------------------
    def checkpoint_payload(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "task": self.identity.task, "backend": self.identity.backend, "algo": self.identity.algo,
            "seed": self.identity.seed, "env_overrides": dict(self.identity.env_overrides),
            "algo_config": self.algo_config.model_dump(),
            "spec": {"num_envs": spec.num_envs, "observation_spec": dict(spec.observation_spec),
                     "action_dim": spec.action_dim, "max_episode_length": spec.max_episode_length,
                     "step_dt": float(spec.step_dt)},
            "agent": self.agent.state_dict(),
            ENV_STATE_KEY: self.env.training_state(),
            "counters": {"env_steps": self.env_steps, "iterations": self.iterations, "updates": self.updates,
                         "update_credit": self.update_credit, "wall_s": self.total_wall_s()},
            "rng": capture_rng_state(),
        }

    def total_wall_s(self) -> float:
        """Training wall-clock over all sessions of this run (resumes included)."""
        running = 0.0 if self.session_started_at is None else time.perf_counter() - self.session_started_at
        return self.elapsed_before_resume_s + running

    def save(self, path: Path) -> None:
        self.join_learner()
        if self.update_sums:  # never replace a good checkpoint with diverged weights (one sync; saves are rare)
            self._checked_update_sums()
        try:  # save_checkpoint refuses NaN or inf anywhere in the state (losses may be finite while a weight is not)
            save_checkpoint(path, self.checkpoint_payload())
        except NonFiniteState as error:
            raise LearnerDiverged(self._divergence_message(f"non-finite state ({', '.join(error.parts[:5])})")) from None
        self.last_saved = (Path(path), self.env_steps)

    def _checked_update_sums(self) -> dict[str, float]:
        """The losses summed since the last flush, read to the host in one sync; raises
        LearnerDiverged if any is NaN or inf."""
        names = list(self.update_sums)
        sums = dict(zip(names, torch.stack([self.update_sums[n] for n in names]).tolist(), strict=True))
        diverged = sorted(n for n, total in sums.items() if not math.isfinite(total))
        if diverged:
            raise LearnerDiverged(self._divergence_message(f"non-finite loss ({', '.join(diverged)})"))
        return sums

    def _divergence_message(self, what: str) -> str:
        """What went wrong and what is on disk: only checkpoints checked finite are written
        and loaded, so a named checkpoint holds finite weights."""
        if self.last_saved is not None:
            path, env_steps = self.last_saved
            kept = f"{path} holds the finite weights of env step {env_steps}"
        elif self.out_dir is None:
            kept = "this process writes no checkpoints"
        elif self.resumed_from_env_steps is not None:
            kept = (f"this session wrote no checkpoint; the one it resumed from (env step "
                    f"{self.resumed_from_env_steps}, checked finite when loaded) is unchanged")
        else:
            kept = f"no checkpoint was written to {self.out_dir}"
        return (f"{what} by update {self.updates} (env step {self.env_steps}); training stopped without saving: "
                f"{kept}")

    def restore(self, document: dict[str, Any]) -> None:
        """Continue from a validated checkpoint document (see checkpoint.load_checkpoint)."""
        self.join_learner()
        if ENV_STATE_KEY not in document:
            raise CheckpointError(
                f"a checkpoint of format {document.get('format_version')} holds no env training state: "
                "resumed, its env would start again from step 0 (a curriculum from its first stage); "
                "it can still be played, judged and exported")
        before = self.env.training_state()
        try:  # first: a state of another env is refused before anything here changed
            self.env.load_training_state(document[ENV_STATE_KEY])
        except ValueError as error:
            raise CheckpointError(f"the checkpoint's env training state does not fit this env: {error}") from None
        try:
            self.agent.load_state_dict(document["agent"])
        except Exception:  # a learner state that does not fit: the env goes back to where it was
            self.env.load_training_state(before)
            raise
        # An action computed ahead (overlap_learning) came from the weights just replaced: the
        # next step acts afresh with the restored ones, as it does with the setting off.
        self.collector.set_act_ahead(self.collector.wait_for_learner)
        counters = document["counters"]
        self.env_steps = int(counters["env_steps"])
        self.iterations = int(counters["iterations"])
        self.updates = int(counters["updates"])
        self.update_credit = float(counters["update_credit"])
        self.elapsed_before_resume_s = float(counters["wall_s"])
        self.resumed_from_env_steps = self.env_steps
        restore_rng_state(document["rng"])
