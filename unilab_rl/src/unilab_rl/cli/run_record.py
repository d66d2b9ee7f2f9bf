"""The run record: ``OUT/run.json``, the resolved configuration of a training run.

``unilab-train`` writes it when it claims ``--out`` (before the first step, so a run cut
short still has it) and rewrites it on ``--resume`` with that session's configuration. It
holds what the run was given after the preset, the checkpoint and the defaults were
applied: task, backend, algorithm, env count, seed, device, budget, the algorithm and
runner configs (every field, as validated), the env overrides and the resolved env
config's fingerprint, the preset's name and the goals; and what it ran with: package
versions, the git commit, the command line.

``unilab-train --config OUT/run.json [--out NEW] [flags] [key=value ...]`` runs it again.
Taken from the record (each unless the command line gives it): ``task``, ``backend``,
``algo``, ``num_envs``, ``seed``, ``device``, the budget (``steps`` or ``minutes``), the
algorithm config (only when the algorithm is the record's), the runner config and the env
overrides (``key=value`` tokens on the command line win, key by key), and the goals (the
command line's ``--goal`` are added). Not taken: ``--out`` (and the output files),
``--resume``, ``--overwrite``, ``--nproc``, the progress and TensorBoard switches, and the
preset (already resolved into the configs; ``--preset`` with ``--config`` is refused).
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

RECORD_NAME = "run.json"
RECORD_FORMAT = "unilab_rl.run"
RECORD_FORMAT_VERSION = 1
PACKAGES = ("torch", "mujoco", "mujoco-warp", "warp-lang", "genesis-world", "unisim-core", "unilab", "unilab-rl")
# Fields --config takes when the command line leaves them unset (argparse's None).
TAKEN_FLAGS = ("task", "backend", "algo", "num_envs", "seed", "device")


class RecordBudget(BaseModel):
    steps: StrictInt | None = None
    minutes: float | None = None


class _RecordFields(BaseModel):
    """The types of the fields ``--config`` applies; other fields are left as written."""

    model_config = ConfigDict(extra="allow")

    task: StrictStr
    backend: StrictStr
    algo: StrictStr
    num_envs: StrictInt
    seed: StrictInt
    device: StrictStr | None = None
    preset: StrictStr | None = None
    budget: RecordBudget
    algo_config: dict[str, Any]
    runner_config: dict[str, Any]
    env_overrides: dict[str, Any]
    goals: list[StrictStr]


class RunRecordError(ValueError):
    """--config names no readable run record; the message says why."""


def versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on (None: not installed)."""
    return {"python": sys.version.split()[0], **{name: installed_version(name) for name in PACKAGES}}


def installed_version(name: str) -> str | None:
    """The installed distribution ``name``'s version; None where it runs from a source tree
    on the path, not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit(where: Path | None = None) -> str:
    """The commit of the checkout this package runs from ('-dirty' when it has changes), or
    'unknown' outside a git checkout."""
    where = where or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                                check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}-dirty" if dirty else commit


def load_run_record(path: Path) -> dict[str, Any]:
    """The record at ``path``, checked to be one ``unilab-train`` wrote."""
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise RunRecordError(f"--config {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunRecordError(f"--config {path}: not a readable JSON run record ({error})") from None
    if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
        raise RunRecordError(f"--config {path}: not a run record written by unilab-train (format "
                             f"{RECORD_FORMAT!r} expected)")
    if record.get("format_version") != RECORD_FORMAT_VERSION:
        raise RunRecordError(f"--config {path}: run record version {record.get('format_version')!r}; this "
                             f"unilab-train reads version {RECORD_FORMAT_VERSION}")
    missing = [key for key in ("task", "backend", "algo", "num_envs", "seed", "budget", "algo_config",
                               "runner_config", "env_overrides", "goals") if key not in record]
    if missing:
        raise RunRecordError(f"--config {path}: the run record lacks {', '.join(missing)}")
    try:
        _RecordFields.model_validate(record)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}={e.get('input')!r}: {e['msg']}"
                             for e in error.errors())
        raise RunRecordError(f"--config {path}: the run record's fields have the wrong types ({problems})") from None
    return record


def apply_run_record(args: Any, record: dict[str, Any]) -> dict[str, Any]:
    """Fill what the command line left unset from ``record``; return the bases the configs
    are validated from (``algo``, ``runner``, ``env``; the command line's tokens go on top)."""
    for key in TAKEN_FLAGS:
        if getattr(args, key) is None and record.get(key) is not None:
            setattr(args, key, record[key])
    if args.steps is None and args.minutes is None:
        args.steps, args.minutes = record["budget"].get("steps"), record["budget"].get("minutes")
    args.goal = [*record["goals"], *(g for g in args.goal if g not in record["goals"])]
    same_algo = args.algo == record["algo"]
    return {"algo": dict(record["algo_config"]) if same_algo else {}, "runner": dict(record["runner_config"]),
            "env": {k: str(v) for k, v in record["env_overrides"].items()}}
