"""Rows of other projects' envs (``unilab-bench peer`` records) in the results tables."""

from __future__ import annotations

from typing import Any

from unilab_bench.results.formatting import device, median_of, rate, rate_span, table, when


def is_peer(record: dict[str, Any]) -> bool:
    """Another project's env (``unilab-bench peer``), not ours: its subject names the project."""
    return bool((record.get("subject") or {}).get("project"))


def peer_label(subject: dict[str, Any]) -> str:
    """``mjlab 1.6.0 `Mjlab-Velocity-Flat-Unitree-G1```: the project, its version and its own task."""
    project, version = subject.get("project", "-"), subject.get("project_version")
    name = project if not version or version in project else f"{project} {version}"
    task = str(subject.get("task", "-")).removeprefix(f"{project}/")
    return f"{name} `{task}`"


def peer_figure(figures: dict[str, Any]) -> str:
    return (f"{rate(median_of(figures.get('env_steps_per_s')))} env-steps/s zero actions, "
            f"{rate(median_of(figures.get('random_steps_per_s')))} random")


def peer_rows(records: list[dict[str, Any]]) -> list[str]:
    rows = []
    for r in records:
        if r["kind"] != "env" or not is_peer(r):
            continue
        s, f = r["subject"], r["figures"]
        env, physics = f.get("env_steps_per_s") or {}, s.get("physics") or {}
        sim = (f"{1e3 * physics['timestep']:.3g} ms x {physics.get('decimation')}, {physics.get('solver')} "
               f"{physics.get('iterations')}/{physics.get('ls_iterations')} iterations") if physics.get("timestep") else "-"
        graph = {True: "yes", False: "no"}.get(s.get("cuda_graph"), "-")
        rows.append([peer_label(s), f"{s.get('backend')}, {s.get('num_envs')}", device(r) if device(r) != "cpu"
                     else (r.get("cpu") or "cpu"),
                     f"{rate(env.get('median'))} ({rate_span([env.get('min'), env.get('max')])})",
                     rate(median_of(f.get("random_steps_per_s"))), graph, sim, f"`{s.get('ours') or '-'}`", when([r]),
                     f"`{r['id']}`"])
    header = ["project, its task", "backend, envs", "GPU (or CPU)", "env-steps/s, zero actions (min-max)", "random actions",
              "its CUDA graph", "physics: dt x substeps, solver iterations/line-search (its own settings)", "ours", "date (commit)", "record"]
    return table(header, rows) if rows else []


def peer_readme_row(peer: dict[str, Any], gpu: str) -> list[str]:
    """The README's row of a peer's env on ``gpu``."""
    s = peer["subject"]
    return [f"env step, {peer_label(s)}", f"{s.get('backend')}, {s.get('num_envs')} envs", gpu,
            peer_figure(peer["figures"])]
