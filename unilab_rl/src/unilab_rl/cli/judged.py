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
from unilab_rl.cli.play import load_policy
from unilab_rl.contract import POLICY_GROUP
from unilab_rl.runner import snapshot_seconds


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

    def run_identity(self) -> tuple[Any, ...]:
        return self.task, self.backend, self.algo, self.env_overrides


def judged_checkpoints(path: Path) -> list[Judged]:
    """A checkpoint, or a run directory's checkpoints; every one is read and checked before any
    is judged."""
    found = []
    for file in checkpoints_to_judge(path):
        document = load_checkpoint(file)

        def acting(env: Any, document: dict[str, Any] = document) -> Callable[[dict[str, Any]], Any]:
            agent = load_policy(document, env)
            return lambda obs: agent.act(obs, deterministic=True)

        counters = document["counters"]
        found.append(Judged("checkpoint", file, document["task"], document["algo"], document["backend"],
                            dict(document["env_overrides"]), int(counters["env_steps"]), counters["wall_s"], acting))
    for judged in found[1:]:
        if judged.run_identity() != found[0].run_identity():
            raise CheckpointError(f"--checkpoint {path}: {judged.path.name} is from another run than "
                                  f"{found[0].path.name} (task, backend, algorithm or env overrides differ)")
    return found


def checkpoints_to_judge(path: Path) -> list[Path]:
    """A checkpoint file, or a run directory: its snapshots by training time, then its final
    ``checkpoint.pt``."""
    if not path.is_dir():
        return [path]
    snapshots = sorted((seconds, p) for p in path.glob("checkpoint-*s.pt")
                       if (seconds := snapshot_seconds(p.name)) is not None)
    found = [p for _, p in snapshots] + [p for p in [path / "checkpoint.pt"] if p.is_file()]
    if not found:
        raise CheckpointError(f"--checkpoint {path}: a run directory without checkpoint.pt or snapshots "
                              "(checkpoint-<S>s.pt)")
    return found


def exports_to_judge(path: Path) -> list[Path]:
    """An exported policy file, or a folder of them as ``unilab-export --checkpoint RUN_DIR``
    writes: ``policy-<S>s.<ext>`` by training time, then ``policy.<ext>``, all of one format."""
    from unilab_rl.export import SUFFIXES

    if not path.is_dir():
        return [path]
    found = {}
    for suffix in SUFFIXES.values():
        timed = sorted((seconds, p) for p in path.glob(f"policy-*s{suffix}")
                       if (seconds := _exported_snapshot_seconds(p.name, suffix)) is not None)
        files = [p for _, p in timed] + [p for p in [path / f"policy{suffix}"] if p.is_file()]
        if files:
            found[suffix] = files
    if len(found) != 1:
        raise ValueError(f"--policy {path}: expected exported policies of one format (policy-<S>s.onnx ... "
                         f"policy.onnx, or .pt), found {sorted(found) or 'none'}")
    return next(iter(found.values()))


def _exported_snapshot_seconds(name: str, suffix: str) -> float | None:
    """``policy-90s.onnx`` is ``checkpoint-90s.pt`` exported: its training time, else None."""
    return snapshot_seconds("checkpoint" + name.removeprefix("policy").removesuffix(suffix) + ".pt")


def judged_exports(path: Path) -> list[Judged]:
    """Every exported policy ``path`` names, each checked before any is judged; a folder's must
    come from one run (task, backend, algorithm and env overrides)."""
    found = [judged_export(file) for file in exports_to_judge(path)]
    for judged in found[1:]:
        if judged.run_identity() != found[0].run_identity():
            raise ValueError(f"--policy {path}: {judged.path.name} is from another run than {found[0].path.name}")
    return found


def judged_export(path: Path) -> Judged:
    """An exported policy file, refused with a message naming what does not fit."""
    from unilab_rl.cli.export import METADATA_FORMAT, task_fingerprint
    from unilab_rl.export import load_exported, read_metadata

    if not path.is_file():
        raise ValueError(f"--policy {path}: no such file")
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
                  int(metadata["trained_env_steps"]), metadata.get("trained_wall_s"), acting)
