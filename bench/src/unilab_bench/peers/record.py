"""The compact store record of a peer's timing (``unilab-bench peer``'s JSON).

A peer record is of kind ``env`` (streamed env steps per second of an env with a zero policy,
the figure our env records carry) and says whose env it was in ``subject``:

    subject: {"project": "mjlab", "project_version": "1.6.0", "task": "mjlab/Mjlab-Velocity-Flat-Unitree-G1",
              "backend": "mjwarp", "num_envs": 4096, "device": "cuda", "ours": "g1_walk_flat",
              "cuda_graph": true, "physics": {...}, "versions": {...}}
    figures: {"env_steps_per_s": {min, median, max}, "random_steps_per_s": {min, median, max}}

``task`` is prefixed with the project, so the record's id names it; ``ours`` is the task of ours
the peer's env corresponds to (the README prints the peer's row beside that task's).
"""

from __future__ import annotations

from typing import Any

from unilab_bench.results.records import command_text, known_commit, machine_names, today
from unilab_bench.results.store import make_record

BENCHMARK = "unilab_bench.peers"
PHYSICS = ("timestep", "decimation", "solver", "iterations", "ls_iterations", "cone", "integrator", "ccd_iterations",
           "nconmax", "njmax")


def _stats(value: Any) -> dict[str, float] | None:
    if isinstance(value, dict) and {"min", "median", "max"} <= set(value):
        return {k: value[k] for k in ("min", "median", "max")}
    return None


def check_full(full: dict[str, Any]) -> None:
    """Raise ValueError naming what a peer JSON lacks (before any record is made of it)."""
    if full.get("benchmark") != BENCHMARK:
        raise ValueError(f"not a unilab-bench peer record (benchmark: {full.get('benchmark')!r})")
    missing = [k for k in ("project", "version", "task", "sim", "num_envs", "device", "env_steps_per_s", "versions")
               if full.get(k) in (None, "", {})]
    rates = full.get("env_steps_per_s") or {}
    missing += [f"env_steps_per_s.{k}" for k in ("env_zero", "env_random") if _stats(rates.get(k)) is None]
    if missing:
        raise ValueError(f"peer record lacks {', '.join(missing)}")


def peer_record(full: dict[str, Any], *, command: str | None = None, source: str | None = None,
                date: str | None = None, caches: str | None = None) -> dict[str, Any]:
    """A store record of ``unilab-bench peer``'s JSON record."""
    check_full(full)
    gpu, cpu = machine_names(full.get("machine"))
    physics = full.get("physics") or {}
    rates = full["env_steps_per_s"]
    subject = {
        "project": full["project"], "project_version": full["version"], "task": f"{full['project']}/{full['task']}",
        "backend": full["sim"], "num_envs": full["num_envs"], "device": str(full["device"]).split(":")[0],
        "ours": full.get("ours"), "cuda_graph": full.get("cuda_graph"),
        "physics": {k: physics[k] for k in PHYSICS if physics.get(k) is not None} or None,
        "versions": full["versions"],
    }
    subject = {k: v for k, v in subject.items() if v is not None}
    figures = {"env_steps_per_s": _stats(rates["env_zero"]), "random_steps_per_s": _stats(rates["env_random"])}
    return make_record("env", date or str(full.get("time") or today())[:10], subject, figures,
                       gpu=full.get("gpu") or gpu, cpu=cpu, caches=caches, commit=known_commit(full.get("git_commit")),
                       command=command or command_text(full.get("command")), source=source)
