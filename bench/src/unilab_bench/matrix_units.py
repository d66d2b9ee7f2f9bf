"""The matrix's units: one process of one tree, its JSON record kept in the units folder. A run
cut short and started again with the same ``--units`` reads what it finished instead of measuring
it again, and refuses records that would not pair: made by another command, at another commit
of their tree, or on another machine."""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from unilab_rl.machine_info import cpu_identity, machine

from unilab_bench.matrix_trees import Tree


def run_unit(tree: Tree, cmd: list[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """One process of one tree; its JSON record, or why there is none."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=tree.env(), cwd=tree.root, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": f"failed: timed out after {timeout_s:.0f} s", "wall_s": timeout_s}
    wall = time.perf_counter() - t0
    if done.returncode or not out.exists():
        tail = (done.stderr or done.stdout)[-1500:]
        return {"status": f"failed: exit {done.returncode}", "stderr_tail": tail, "wall_s": wall}
    record = json.loads(out.read_text())
    record["_wall_s"] = wall
    # Kept in the unit too, so a run assembled from its units still says what each process cost.
    out.write_text(json.dumps(record, indent=1))
    return {"status": "ok", "record": record, "wall_s": wall}


def reuse_or_run(tree: Tree, cmd: list[str], out: Path, timeout_s: float) -> dict[str, Any]:
    """A unit whose record is already in the units folder (a run cut short and started again
    with the same ``--units``) is read, not run again; a failed unit left no record and runs.
    A record made by another command (other settings) or at another commit of its tree is
    refused: it would pair unlike figures, or measure other code under this tree's name."""
    if not out.exists():
        return run_unit(tree, cmd, out, timeout_s)
    record = json.loads(out.read_text())
    made_by = str(record.get("command", "")).split()[1:]  # the runner's argv, after its own path
    if made_by != " ".join(cmd[3:]).split():  # cmd: python -m MODULE ARGS...
        raise ValueError(f"--units: {out.name} was made by another command ({' '.join(made_by)!r}, not "
                         f"{' '.join(cmd[3:])!r}); use an empty folder or the same settings")
    made_at = _commit_of(str(record.get("git_commit", "")))
    if made_at and _commit_of(tree.commit) and made_at != _commit_of(tree.commit):
        raise ValueError(f"--units: {out.name} was measured at commit {made_at}, and the {tree.label} tree is "
                         f"now {tree.commit}; use an empty folder")
    return {"status": "ok", "record": record, "wall_s": record.get("_wall_s"), "reused": True}


def _commit_of(label: str) -> str:
    """The commit a record or tree names, without the marks of uncommitted changes ('' if unknown):
    the runners write 'SHA' or 'SHA-dirty', the head tree 'SHA+uncommitted'."""
    commit = label.split("+")[0].removesuffix("-dirty")
    return "" if not commit or commit.startswith("unknown") else commit


def prepare_units(units: Path | None, workdir: Path) -> Path:
    """The folder the unit records go to: ``--units`` (kept; records already there are reused,
    so a run cut short resumes where it stopped) or a temporary one. Units measured on another
    machine are refused: their figures do not pair with this machine's."""
    if units is None:
        return workdir
    # The CPU too: hosts can share a hostname and GPU model and differ in CPU (see cpu_identity).
    host = machine()
    here = {"hostname": platform.node(), "gpus": host["gpus"], "cpu": cpu_identity(host["lscpu"])}
    stamp = units / "machine.json"
    if stamp.exists():
        there = json.loads(stamp.read_text())
        if there != here:
            raise ValueError(f"--units {units}: its records were measured on {there}, this machine is {here}; "
                             "use an empty folder")
    else:
        units.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(here) + "\n")
    return units
