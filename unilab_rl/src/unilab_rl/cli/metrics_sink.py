"""Where training metrics go: TensorBoard, a JSON-lines log, and an optional learning curve.

Everything is logged under the names its source gives (``collector/...``, ``perf/...``,
``env/<name>`` for what the env's task declares). The curve and the status line keep the
runner's few headline numbers plus every metric the task declares under ``metrics/``; no
task's metric is named here. The curve file is rewritten atomically at every log interval,
so a run killed by a time limit still leaves a valid curve of everything it reached.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from unilab_rl.atomic_file import write_atomically
from unilab_rl.cli.run_dir import open_run_file

# The runner's headline numbers, under short names in the curve.
CURVE_KEYS = {
    "collector/episode_return": "episode_return",
    "collector/episode_length": "episode_length",
    "collector/episode_length_fraction": "episode_length_fraction",
    "collector/episode_failure_fraction": "episode_failure_fraction",
    "collector/episodes": "episodes_ended",
    "perf/env_steps_per_s": "env_steps_per_s",
    "perf/env_steps_per_s_all_ranks": "env_steps_per_s_all_ranks",
    "progress/updates": "updates",
}
TASK_METRICS_PREFIX = "env/metrics/"  # what the task's terms declare; kept as "metrics/..."


def shown_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The headline numbers and the task's declared metrics, under their curve names."""
    shown = {short: metrics[key] for key, short in CURVE_KEYS.items() if key in metrics}
    shown.update({key.removeprefix("env/"): v for key, v in metrics.items() if key.startswith(TASK_METRICS_PREFIX)})
    return shown


class TrainingSink:
    def __init__(self, out_dir: Path, curve_path: Path | None = None, header: dict[str, Any] | None = None,
                 tensorboard: bool = True, print_every_s: float | None = None,
                 on_write: Callable[[float, dict[str, float]], None] | None = None) -> None:
        self.out_dir = out_dir
        self.on_write = on_write  # e.g. a goal tracker: (wall_s, metrics) of every interval
        # Without a progress bar (--no-progress, or stdout not a terminal), a status line every
        # print_every_s seconds: one line each, never a carriage-return bar.
        self.print_every_s = print_every_s
        self.last_print_s = float("-inf")
        self.budget: tuple[int, int | None, float, float | None] | None = None
        # Not through a link: a dangling one would create a file outside the run directory.
        self.jsonl = os.fdopen(open_run_file(out_dir / "metrics.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT), "a")
        self.curve_path = curve_path
        self.curve: dict[str, Any] = {"header": header or {}, "max_episode_length": None, "points": []}
        # Rank 0 writes; its counters are its own. Data-parallel ranks step in lockstep (every
        # update waits for the all-reduce), so the job's rate is the rank's times world_size.
        self.world_size = int(self.curve["header"].get("world_size", 1))
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(out_dir / "tensorboard"))

    def set_max_episode_length(self, steps: int) -> None:
        self.curve["max_episode_length"] = steps

    def set_budget(self, start_env_steps: int, end_env_steps: int | None, start_wall_s: float,
                   seconds: float | None) -> None:
        """This session's budget, so a status line can say how far it is (the larger of the
        step and the time fraction)."""
        self.budget = (start_env_steps, end_env_steps, start_wall_s, seconds)

    def _done_fraction(self, env_steps: int, wall_s: float) -> float | None:
        if self.budget is None:
            return None
        start_steps, end_steps, start_wall, seconds = self.budget
        fractions = []
        if end_steps is not None and end_steps > start_steps:
            fractions.append((env_steps - start_steps) / (end_steps - start_steps))
        if seconds:
            fractions.append((wall_s - start_wall) / seconds)
        return min(max(fractions), 1.0) if fractions else None

    def write(self, env_steps: int, wall_s: float, metrics: dict[str, float]) -> None:
        if self.world_size > 1 and "perf/env_steps_per_s" in metrics:
            metrics = {**metrics, "perf/env_steps_per_s_all_ranks": metrics["perf/env_steps_per_s"] * self.world_size}
        if self.on_write is not None:
            self.on_write(wall_s, metrics)
        record = {"env_steps": env_steps, "wall_s": round(wall_s, 3), **metrics}
        self.jsonl.write(json.dumps(record) + "\n")
        self.jsonl.flush()
        if self.writer is not None:
            for key, value in metrics.items():
                self.writer.add_scalar(key, value, env_steps)
                self.writer.add_scalar(f"wall_clock/{key}", value, int(wall_s * 1000))
        if self.print_every_s is not None and wall_s - self.last_print_s >= self.print_every_s:
            self.last_print_s = wall_s
            shown = shown_metrics(metrics)
            done = self._done_fraction(env_steps, wall_s)
            percent = "" if done is None else f"{100 * done:3.0f}% "
            print(f"[{wall_s:7.1f}s] {percent}env_steps={env_steps} "
                  + " ".join(f"{k}={v:.4g}" for k, v in shown.items()), flush=True)
        if self.curve_path is not None:
            point = {"wall_s": round(wall_s, 3), "env_steps": env_steps}
            point.update(shown_metrics(metrics))
            self.curve["points"].append(point)
            write_json_atomic(self.curve_path, self.curve)

    def close(self) -> None:
        self.jsonl.close()
        if self.writer is not None:
            self.writer.close()


def write_json_atomic(path: Path, document: dict[str, Any]) -> None:
    data = json.dumps(document, indent=1).encode()
    write_atomically(path, lambda stream: stream.write(data))
