"""Checkpoints: one file, written atomically, validated before anything uses it.

A checkpoint holds everything needed to continue a run: the learner state (networks,
optimizers, normalizers, exploration state), counters, RNG states, and the run's identity
(task, backend, env overrides, algorithm and its config). The replay buffer is not saved:
it is large and refills in ``learning_starts`` transitions after a resume.

Atomic: written to a temporary file in the destination directory, flushed and fsynced, then
``os.replace``d over the destination, so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import os
import pickle
import random
import tempfile
from pathlib import Path
from typing import Any

import torch

from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION

CHECKPOINT_FORMAT = "unilab_rl.checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
# What torch.load raises for truncated, foreign or tampered files (seen: UnpicklingError for
# random bytes, RuntimeError for a damaged zip, EOFError for an empty file).
CORRUPT_FILE_ERRORS = (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, KeyError,
                       TypeError, AttributeError, IndexError)
REQUIRED_KEYS = ("task", "backend", "env_overrides", "algo", "algo_config", "spec", "agent", "counters", "rng")


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, corrupt or belongs to another run."""


def capture_rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "python": random.getstate(),
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available() and state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(_as_python_random_state(state["python"]))


def _as_python_random_state(state: Any) -> tuple[Any, ...]:
    # torch.save keeps tuples, but be lenient with lists from other writers.
    version, internal, gauss = state
    return (version, tuple(internal), gauss)


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (plus format markers) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_FORMAT_VERSION,
                "contract_version": ENV_RUNNER_CONTRACT_VERSION, **payload}
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            torch.save(document, stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Read and validate a checkpoint; raises CheckpointError with the reason."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist or is not a file")
    try:
        # weights_only: a checkpoint is data; refuse anything that would run code on load.
        document = torch.load(path, map_location=map_location, weights_only=True)
    except CORRUPT_FILE_ERRORS as error:
        raise CheckpointError(f"checkpoint {path} is corrupt or not a unilab_rl checkpoint ({error})") from None
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a unilab_rl checkpoint (no {CHECKPOINT_FORMAT!r} marker)")
    if document.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {document.get('format_version')}, "
            f"this unilab_rl reads {CHECKPOINT_FORMAT_VERSION}")
    missing = [key for key in REQUIRED_KEYS if key not in document]
    if missing:
        raise CheckpointError(f"checkpoint {path} is incomplete: missing {missing}")
    return document


def check_same_task(document: dict[str, Any], task: str, path: Path) -> None:
    if document["task"] != task:
        raise CheckpointError(
            f"checkpoint {path} was trained on task {document['task']!r}, not {task!r}; "
            f"resume with --task {document['task']} or start a new run")
