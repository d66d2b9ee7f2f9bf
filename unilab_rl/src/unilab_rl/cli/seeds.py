"""``unilab-train --seeds 0,1,2``: one training process per seed, side by side on one machine,
and the table that reads them together.

Why side by side: one seed says little about a preset (on the walking task three FastSAC seeds
ended at 17, 16 and 15 of 17 sweep commands), and a GPU that runs one training process has room
for another at about half of each one's throughput. Seeds sharing a GPU collect fewer env steps
per second, not different ones: updates per env step are set by the algorithm, so the runs are
compared at equal env steps, which ``runner.snapshot_at_steps`` keeps.

Each seed is its own process (the same command with ``--out OUT/seed-K --seed K``) training
into ``OUT/seed-K/`` with its output in ``OUT/seed-K/log.txt``; ``OUT/seeds.json`` then holds, per
seed, its exit code, env steps, throughput, when its first updates were issued
(``first_learning_s``) and, when judged (``--eval``), each checkpoint's env steps and cases
passed (and, for runs that kept an averaged policy, its latest actor's as
``checkpoints_latest_actor``). A command any seed's run would refuse is refused before any
seed starts, with nothing created.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from unilab_rl.cli.launch import without_flags
from unilab_rl.cli.metrics_sink import write_json_atomic
from unilab_rl.cli.run_dir import RunDirError, check_file_target
from unilab_rl.cli.train_command import BAD_INPUT, EXIT_BAD_INPUT, check_command
from unilab_rl.cli.train_eval import EVAL_DIR, LATEST_ACTOR_DIR

PROG = "unilab-train"
# Taken out of the command each seed runs: it names its own.
OWN_FLAGS = ("--seeds", "--out")


def run_side_by_side(seeds: list[int], out: Path, argv: list[str], tasks: list[str], backends: list[str] | None,
                     progress_every_s: float = 60.0) -> int:
    """Run the command ``argv`` (unilab-train's, without ``--seeds``) for every seed at once, each
    as ``--out OUT/seed-K --seed K``; wait for all (printing each seed's latest log line every
    ``progress_every_s``), write and print the table. Exit code: an error's (>= 2) if any seed
    had one, else 1 if any seed's evaluation failed, else 0. A command some seed's run would
    refuse is refused here first, with exit code 2 and nothing created under ``out``."""
    refusal = refusal_of_any_seed(seeds, out, argv, tasks, backends)
    if refusal is not None:
        print(f"{PROG}: error: {refusal}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    processes, logs = [], []
    for seed in seeds:
        folder = out / f"seed-{seed}"
        folder.mkdir(parents=True, exist_ok=True)
        logs.append(folder / "log.txt")
        command = [sys.executable, "-m", "unilab_rl.cli.train", *seed_argv(seed, out, argv)]
        print(f"{PROG}: seed {seed}: {' '.join(command[1:])} > {logs[-1]}", flush=True)
        with _open_log(logs[-1]) as log:
            processes.append(start_process(command, log))
    try:
        codes = _wait(processes, logs, seeds, progress_every_s)
    except KeyboardInterrupt:  # stop every seed, not only the one being waited on
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
        raise
    table = seed_table(out, seeds, codes)
    write_json_atomic(out / "seeds.json", table)
    for line in table_lines(table):
        print(line, flush=True)
    errors = [code for code in codes if code not in (0, 1)]
    return max(errors) if errors else max(codes)


def start_process(command: list[str], log: IO[str]) -> subprocess.Popen:
    """One seed's process, its output into ``log`` (one place, so tests can stand in for it)."""
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)


def seed_argv(seed: int, out: Path, argv: list[str]) -> list[str]:
    """One seed's unilab-train arguments: the same ones are checked and then run. Its own
    ``--out`` and ``--seed`` come last, so they win over any spelling of them left in ``argv``;
    its output goes to a log, so progress is a status line every 30 s."""
    return [*without_flags(argv, OWN_FLAGS), "--out", str(out / f"seed-{seed}"), "--seed", str(seed),
            "--no-progress"]


def refusal_of_any_seed(seeds: list[int], out: Path, argv: list[str], tasks: list[str],
                        backends: list[str] | None) -> str | None:
    """The first seed's reason to refuse the command (naming the seed), or the table's, or None
    when every seed's run would start. Reads only: a refused command must leave ``out`` as it was, so
    each seed's process is checked here, before any is started or any folder created."""
    for seed in seeds:
        try:
            check_command(seed_argv(seed, out, argv), tasks, backends)
            # This command's own files: one in the way fails now, not once the seeds have trained.
            check_file_target(out / f"seed-{seed}" / "log.txt", "--out")
        except BAD_INPUT as error:
            return f"seed {seed}: {error}"
    try:
        check_file_target(out / "seeds.json", "--out")
    except RunDirError as error:
        return str(error)
    return None


def _open_log(log: Path) -> IO[str]:
    """``log`` to append to: a log a previous start left is kept, never truncated; the new
    start is marked in it."""
    stream = log.open("a")
    if stream.tell() > 0:
        stream.write(f"\n--- {PROG}: started again {time.strftime('%Y-%m-%d %H:%M:%S')} ---\n")
        stream.flush()
    return stream


def _wait(processes: list[subprocess.Popen], logs: list[Path], seeds: list[int], progress_every_s: float) -> list[int]:
    """The processes' exit codes, once all have ended; meanwhile each seed's latest progress."""
    last_report = time.monotonic()
    while any(process.poll() is None for process in processes):
        time.sleep(min(1.0, progress_every_s))
        if time.monotonic() - last_report >= progress_every_s:
            last_report = time.monotonic()
            for seed, log, process in zip(seeds, logs, processes, strict=True):
                if process.poll() is None:
                    print(f"{PROG}: seed {seed}: {_last_line(log)}", flush=True)
    return [process.returncode for process in processes]


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output yet)"


def seed_table(out: Path, seeds: list[int], codes: list[int]) -> dict[str, Any]:
    """What each seed's folder says: its summary and, when judged, its checkpoints."""
    rows = []
    for seed, code in zip(seeds, codes, strict=True):
        folder = out / f"seed-{seed}"
        summary = _read(folder / "summary.json") or {}
        rows.append({"seed": seed, "exit_code": code, "env_steps": summary.get("env_steps"),
                     "env_steps_per_s_learning": summary.get("median_env_steps_per_s_learning"),
                     # Seeds sharing one machine compile at once: this tells one whose compile ate its budget.
                     "first_learning_s": summary.get("first_learning_s"),
                     "checkpoints": _judged_checkpoints(folder / EVAL_DIR),
                     "checkpoints_latest_actor": _judged_checkpoints(folder / LATEST_ACTOR_DIR)})
    judged = [row for row in rows if row["checkpoints"]]
    return {"seeds": rows, "judged": len(judged),
            "passed_at_last_checkpoint": sum(row["checkpoints"][-1]["passed"] for row in judged)}


def table_lines(table: dict[str, Any]) -> list[str]:
    lines = []
    for row in table["seeds"]:
        cells = ", ".join(f"{_steps(c['env_steps'])} {c['cases_passed']}/{c['cases']}" for c in row["checkpoints"])
        lines.append(f"{PROG}: seed {row['seed']} (exit {row['exit_code']}): {cells or 'not judged'}")
        if row["checkpoints_latest_actor"]:  # the run kept an averaged policy, judged above
            latest = ", ".join(f"{_steps(c['env_steps'])} {c['cases_passed']}/{c['cases']}"
                               for c in row["checkpoints_latest_actor"])
            lines.append(f"{PROG}: seed {row['seed']} latest actor: {latest}")
    if table["judged"]:
        lines.append(f"{PROG}: {table['passed_at_last_checkpoint']} of {table['judged']} judged seeds passed "
                     "at their last checkpoint")
    return lines


def _steps(env_steps: int) -> str:
    return f"{env_steps / 1e6:.1f}M env steps" if env_steps >= 100_000 else f"{env_steps} env steps"


def _judged_checkpoints(folder: Path) -> list[dict[str, Any]]:
    """Each judged checkpoint's env steps and cases passed over every backend it was judged
    on, in training order, from the evaluation's ``over-time.json``."""
    over_time = _read(folder / "over-time.json")
    if over_time is None:
        return []
    return [_cell(row["checkpoint"], row["trained_env_steps"], [v for v in row.values() if isinstance(v, dict)])
            for row in over_time["checkpoints"]]


def _cell(name: str, env_steps: int, backends: list[dict[str, Any]]) -> dict[str, Any]:
    return {"checkpoint": name, "env_steps": int(env_steps), "passed": all(b["passed"] for b in backends),
            "cases_passed": sum(b["cases_passed"] for b in backends), "cases": sum(b["cases"] for b in backends)}


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None
