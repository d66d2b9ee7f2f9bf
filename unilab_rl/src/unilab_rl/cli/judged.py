"""What ``unilab-eval`` judges: trained policies, each with what it was trained on and how to
act with it on a freshly built env.

A checkpoint (or a run directory's snapshots and final checkpoint) acts through the learner it
holds. An exported policy (``unilab-export``) acts through the file a deployment runs, with the
env rebuilt from its metadata; two checks keep its figures honest: the task's fingerprint must
be the one recorded at export (else the task's meaning changed since), and the env's policy
observations must have the recorded layout (term names and widths, in order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unilab_rl.checkpoint import CheckpointError, load_checkpoint
from unilab_rl.cli.export_metadata import METADATA_FORMAT, task_fingerprint
from unilab_rl.cli.trained_env import recorded_env_overrides
from unilab_rl.contract import POLICY_GROUP
from unilab_rl.export import SUFFIXES, check_export_packages, load_exported, read_metadata
from unilab_rl.policy import acting_actor, load_policy
from unilab_rl.snapshot_names import snapshot_env_steps, snapshot_seconds


@dataclass(frozen=True)
class Judged:
    """One trained policy to judge: a checkpoint or an exported policy file, what it was trained
    on, and how to act with it on a built env (deterministically)."""

    kind: str  # "checkpoint" or "policy": the report's key for the file
    path: Path
    task: str
    algo: str
    backend: str
    env_overrides: dict[str, Any]
    env_steps: int
    wall_s: float | None
    acting: Callable[[Any], Callable[[dict[str, Any]], Any]]
    actor: str  # what acts: "averaged" or "latest" (of a checkpoint, or the one an export holds)
    mirror_averaged: bool = False  # an export whose graph averages the actor with its own mirror

    def run_identity(self) -> tuple[Any, ...]:
        return self.task, self.backend, self.algo, self.env_overrides


def kept_files(folder: Path, stem: str, suffix: str) -> list[Path]:
    """What a run kept: its snapshots ``<stem>-<S>s<suffix>`` and ``<stem>-<N>steps<suffix>``,
    then ``<stem><suffix>`` (checkpoints as the runner names them; exported policies as
    ``unilab-export`` does). Names cannot order the two kinds against each other, so the
    callers order what they read by the env steps each holds (a stable sort: the final file
    stays after a snapshot taken at its step)."""
    snapshots = sorted(p for p in folder.glob(f"{stem}-*{suffix}")
                       if snapshot_seconds(p.name, stem, suffix) is not None
                       or snapshot_env_steps(p.name, stem, suffix) is not None)
    return snapshots + [p for p in [folder / f"{stem}{suffix}"] if p.is_file()]


def exported_name(checkpoint: Path, suffix: str) -> str:
    """``checkpoint-90s.pt`` exported is ``policy-90s<suffix>``; ``checkpoint.pt`` is ``policy<suffix>``."""
    return "policy" + checkpoint.stem.removeprefix("checkpoint") + suffix


def check_one_run(items: list[tuple[Path, Any]], flag: str, path: Path) -> None:
    """Refuse ``items`` ((file, its run's identity) pairs) that do not all come from one run,
    naming the first file that does not."""
    first_file, first = items[0]
    for file, identity in items[1:]:
        if identity != first:
            raise CheckpointError(f"{flag} {path}: {file.name} is from another run than {first_file.name} "
                                  "(task, backend, algorithm or env overrides differ)")


def run_checkpoints(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """A checkpoint, or a run directory's checkpoints, each read, and all checked to come from
    one run, before any is used."""
    if path.is_dir():
        files = kept_files(path, "checkpoint", ".pt")
        if not files:
            raise CheckpointError(f"--checkpoint {path}: a run directory without checkpoint.pt or snapshots "
                                  "(checkpoint-<S>s.pt, checkpoint-<N>steps.pt)")
    else:
        files = [path]
    loaded = [(file, load_checkpoint(file)) for file in files]
    # One run by what its env computed: a resume may change how the env ran (``profile_phases``,
    # ``cuda_graph``: the execution settings play, evaluation and export leave out anyway).
    check_one_run([(file, (d["task"], d["backend"], d["algo"], recorded_env_overrides(d)))
                   for file, d in loaded], "--checkpoint", path)
    # Training order: one run's env-step count only grows.
    return sorted(loaded, key=lambda item: int(item[1]["counters"]["env_steps"]))


def judged_checkpoints(path: Path, latest_actor: bool = False) -> list[Judged]:
    """A checkpoint, or a run directory's checkpoints (``run_checkpoints``), to judge: each by
    its averaged policy where the run kept one, else (or with ``latest_actor``) its latest actor."""
    found = []
    for file, document in run_checkpoints(path):

        def acting(env: Any, document: dict[str, Any] = document) -> Callable[[dict[str, Any]], Any]:
            agent = load_policy(document, env, latest_actor)
            return lambda obs: agent.act(obs, deterministic=True)

        counters = document["counters"]
        found.append(Judged("checkpoint", file, document["task"], document["algo"], document["backend"],
                            dict(document["env_overrides"]), int(counters["env_steps"]), counters["wall_s"], acting,
                            acting_actor(document, latest_actor)))
    return found


def judged_exports(path: Path) -> list[Judged]:
    """An exported policy file, or a folder of them as ``unilab-export --checkpoint RUN_DIR``
    writes them (``kept_files`` with stem ``policy``, all of one format), each checked before any
    is judged and all from one run."""
    files = [path]
    if path.is_dir():
        found = {suffix: kept for suffix in SUFFIXES.values() if (kept := kept_files(path, "policy", suffix))}
        if len(found) != 1:
            raise ValueError(f"--policy {path}: expected exported policies of one format (policy-<S>s.onnx, "
                             f"policy-<N>steps.onnx ... policy.onnx, or .pt), found {sorted(found) or 'none'}")
        files = next(iter(found.values()))
    judged = [judged_export(file) for file in files]
    check_one_run([(j.path, j.run_identity()) for j in judged], "--policy", path)
    return sorted(judged, key=lambda j: j.env_steps)  # training order, as run_checkpoints


def judged_export(path: Path) -> Judged:
    """An exported policy file, refused with a message naming what does not fit."""
    if not path.is_file():
        raise ValueError(f"--policy {path}: no such file")
    if path.suffix == SUFFIXES["onnx"]:
        check_export_packages("onnx")  # reading ONNX metadata needs onnx: an ExportError naming the extra
    try:
        metadata = read_metadata(path)
    except (OSError, RuntimeError, ValueError) as error:  # not ONNX, not TorchScript, no metadata
        raise ValueError(f"--policy {path}: not an exported policy with metadata ({error})") from None
    if metadata.get("format") != METADATA_FORMAT:
        raise ValueError(f"--policy {path}: metadata format {metadata.get('format')!r}, expected {METADATA_FORMAT!r}")
    missing = [k for k in ("task", "env_overrides", "task_fingerprint", "algo", "backend", "observation", "output")
               if k not in metadata]
    if missing:
        raise ValueError(f"--policy {path}: metadata lacks {missing} (exported by an older unilab-export: "
                         "export the checkpoint again)")
    task, overrides = metadata["task"], dict(metadata["env_overrides"])
    now = task_fingerprint(task, overrides)
    if now != metadata["task_fingerprint"]:
        raise ValueError(f"--policy {path}: task {task!r} with its overrides has fingerprint {now[:19]}... here, "
                         f"{metadata['task_fingerprint'][:19]}... at export: the task's meaning changed since")
    layout = [(t["name"], t["width"]) for t in metadata["observation"]["terms"]]

    def acting(env: Any) -> Callable[[dict[str, Any]], Any]:
        here = list(env.observation_manager.describe()[POLICY_GROUP].items())
        history = env.cfg.observations[POLICY_GROUP].history_length
        if here != layout or history != metadata["observation"]["history_length"]:
            raise ValueError(f"--policy {path}: this env's policy observations {here} (history {history}) are not "
                             f"the exported layout {layout} (history {metadata['observation']['history_length']})")
        if env.action_dim != metadata["output"]["shape"][1]:
            raise ValueError(f"--policy {path}: {metadata['output']['shape'][1]} actions, this env takes "
                             f"{env.action_dim}")
        run = load_exported(path)
        return lambda obs: run(obs[POLICY_GROUP].float()).to(obs[POLICY_GROUP].device)

    return Judged("policy", path, task, metadata["algo"], metadata["backend"], overrides,
                  int(metadata["trained_env_steps"]), metadata.get("trained_wall_s"), acting,
                  # exports written before averaged policies existed name no actor: they hold the latest
                  metadata.get("actor", "latest"), bool(metadata.get("mirror_averaged", False)))
