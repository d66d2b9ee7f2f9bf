"""Checkpoints: one file, written atomically, validated before anything uses it.

A checkpoint holds everything needed to continue a run: the learner state (networks,
optimizers, normalizers, exploration state), the env's training state (its step count, which
curricula read, and what its terms learned), counters, RNG states, and the run's identity
(task, backend, env overrides, algorithm and its config). The replay buffer is not saved:
it is large and refills in ``learning_starts`` transitions after a resume.

Atomic: written to a temporary file in the destination directory, flushed and fsynced, then
``os.replace``d over the destination, so a crash never leaves a half-written checkpoint.

Verified: every tensor and every container of plain values gets a sha256 digest, written
with the file (``integrity``) and recomputed on load, so damage anywhere (a flipped byte in
a tensor's data, a changed counter) is refused naming the damaged part instead of being
trained on. Every floating-point value must be finite, on save (diverged weights are never
written) and on load. torch.load does not check the zip's CRCs, so without the digests a
damaged tensor loads silently.
"""

from __future__ import annotations

import ctypes
import hashlib
import math
import random
from pathlib import Path
from typing import Any

import torch

from unilab_rl.atomic_file import write_atomically
from unilab_rl.contract import ENV_RUNNER_CONTRACT_VERSION

CHECKPOINT_FORMAT = "unilab_rl.checkpoint"
# 3: the env's training state ("env"); 2: integrity digests. Versions 1 (no digests: the finite
# check only) and 2 are still read, to play, judge and export them; resuming needs 3.
CHECKPOINT_FORMAT_VERSION = 3
READABLE_FORMAT_VERSIONS = (1, 2, 3)
ENV_STATE_KEY = "env"
INTEGRITY_KEY = "integrity"
REQUIRED_KEYS = ("task", "backend", "env_overrides", "algo", "algo_config", "spec", "agent", "counters", "rng")


class CheckpointError(ValueError):
    """A checkpoint is missing, unreadable, corrupt or belongs to another run."""


class NonFiniteState(CheckpointError):
    """A state to be written holds NaN or inf values (named in ``parts``)."""

    def __init__(self, message: str, parts: list[str]) -> None:
        super().__init__(message)
        self.parts = parts


def _tensor_digest(tensor: torch.Tensor) -> str:
    data = tensor.detach().to("cpu").contiguous()
    digest = hashlib.sha256(f"{data.dtype}{tuple(data.shape)}".encode())
    size = data.numel() * data.element_size()
    if size:  # hash the tensor's memory in place (no numpy, no per-byte copy)
        digest.update((ctypes.c_ubyte * size).from_address(data.data_ptr()))
    return digest.hexdigest()


def _walk(value: Any, path: str, digests: dict[str, str], non_finite: list[str]) -> None:
    """Digest ``value`` into ``digests``: one entry per tensor, one per container for its
    keys and plain values; the paths of non-finite floats go to ``non_finite``."""
    if isinstance(value, torch.Tensor):
        digests[path] = _tensor_digest(value)
        if (value.is_floating_point() or value.is_complex()) and not bool(torch.isfinite(value).all()):
            non_finite.append(path)
        return
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list | tuple):
        items = list(enumerate(value))
    else:
        items = [("", value)]
    plain = hashlib.sha256(type(value).__name__.encode())
    for key, child in items:
        child_path = f"{path}.{key}" if path else str(key)
        if isinstance(child, torch.Tensor | dict | list | tuple):
            plain.update(repr(("child", key)).encode())
            _walk(child, child_path, digests, non_finite)
        else:
            plain.update(repr((key, type(child).__name__, child)).encode())
            if isinstance(child, float) and not math.isfinite(child):
                non_finite.append(child_path)
    digests[path or "(top level)"] = plain.hexdigest()


def state_digests(document: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """(digest per part, parts holding NaN or inf) of a checkpoint document, its own
    ``integrity`` entry left out."""
    digests: dict[str, str] = {}
    non_finite: list[str] = []
    _walk({k: v for k, v in document.items() if k != INTEGRITY_KEY}, "", digests, non_finite)
    return digests, non_finite


def _listed(parts: list[str], limit: int = 5) -> str:
    return ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


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
    digests, non_finite = state_digests(document)
    if non_finite:
        raise NonFiniteState(f"not writing {path}: {_listed(non_finite)} hold NaN or inf values", non_finite)
    document[INTEGRITY_KEY] = {"algorithm": "sha256", "digests": digests}
    write_atomically(path, lambda stream: torch.save(document, stream))


def load_checkpoint(path: Path, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Read and validate a checkpoint; raises CheckpointError with the reason."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist or is not a file")
    try:
        # weights_only: a checkpoint is data; refuse anything that would run code on load.
        document = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # noqa: BLE001 - a damaged file raises anything (UnpicklingError, RuntimeError, EOFError, MemoryError, ...)
        raise CheckpointError(f"checkpoint {path} is corrupt or not a unilab_rl checkpoint "
                              f"({type(error).__name__}: {error})") from None
    if not isinstance(document, dict) or document.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a unilab_rl checkpoint (no {CHECKPOINT_FORMAT!r} marker)")
    if document.get("format_version") not in READABLE_FORMAT_VERSIONS:
        raise CheckpointError(
            f"checkpoint {path} has format version {document.get('format_version')}, "
            f"this unilab_rl reads {list(READABLE_FORMAT_VERSIONS)}")
    verify_integrity(document, path)
    missing = [key for key in REQUIRED_KEYS if key not in document]
    if document["format_version"] >= 3 and ENV_STATE_KEY not in document:
        missing.append(ENV_STATE_KEY)
    if missing:
        raise CheckpointError(f"checkpoint {path} is incomplete: missing {missing}")
    return document


def verify_integrity(document: dict[str, Any], path: Path) -> None:
    """Refuse a document whose parts differ from the digests written with it, or that holds
    NaN or inf values; the error names the file and the damaged parts."""
    digests, non_finite = state_digests(document)
    if document["format_version"] >= 2:
        integrity = document.get(INTEGRITY_KEY)
        if not isinstance(integrity, dict) or not isinstance(integrity.get("digests"), dict):
            raise CheckpointError(f"checkpoint {path} is damaged: its integrity record is missing or unreadable")
        written = integrity["digests"]
        damaged = sorted(p for p in digests.keys() | written.keys() if digests.get(p) != written.get(p))
        if damaged:
            raise CheckpointError(f"checkpoint {path} is damaged: {_listed(damaged)} do not match the digests "
                                  "written with the file; use an intact copy or start a new run")
    if non_finite:
        raise CheckpointError(f"checkpoint {path} is damaged: {_listed(non_finite)} hold NaN or inf values; "
                              "use an intact copy or start a new run")


def check_same_task(document: dict[str, Any], task: str, path: Path) -> None:
    if document["task"] != task:
        raise CheckpointError(
            f"checkpoint {path} was trained on task {document['task']!r}, not {task!r}; "
            f"resume with --task {document['task']} or start a new run")
