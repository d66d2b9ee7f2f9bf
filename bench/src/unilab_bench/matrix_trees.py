"""The source trees a matrix runs: this checkout (the head) and, with ``--base REV``, a temporary
worktree of REV, or with ``--base-tree DIR`` a copy of the sources; each runs its own code through
PYTHONPATH, and says what its runners support."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]  # the repository holding this tree
SOURCE_DIRS = ("unisim-core/src", "unilab/src", "unilab_rl/src")
# The benchmarks' own member; a tree from before it existed kept them inside the product packages.
OPTIONAL_SOURCE_DIRS = ("bench/src",)
# Files the sources read at run time from the tree's root: the backend scope (unisim.scope).
RUNTIME_FILES = ("workspace.toml",)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True, cwd=cwd,
                          timeout=60).stdout.strip()


NOT_A_CHECKOUT = "unknown (not a git checkout)"


def git_commit() -> str:
    """The commit of the checkout this tree runs from, or 'unknown' (a tree copied without git)."""
    try:
        return git("rev-parse", "HEAD")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def named_commit(root: Path) -> str:
    """The commit a copied tree's ``COMMIT`` file names (written where the copy was made, since
    the copy has no git), else unknown."""
    try:
        text = (root / "COMMIT").read_text().strip()
    except OSError:
        return NOT_A_CHECKOUT
    return f"{text} (copied tree)" if text else NOT_A_CHECKOUT


def working_tree_state() -> tuple[list[str], str]:
    """The head's uncommitted files and commit label. A copied tree without git (a benchmark
    machine that received the sources only) still runs: its commit is the one its COMMIT file
    names, or unknown."""
    try:
        dirty = [line.split(None, 1)[-1] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]
        return dirty, git("rev-parse", "HEAD") + ("+uncommitted" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return [], named_commit(ROOT)


def copied_tree(label: str, root: Path) -> Tree:
    """A tree given as a folder of sources, e.g. on a benchmark machine that received copies and
    no git: it must hold the source folders. Its commit is its own checkout's where it is one
    (not that of a repository it happens to sit inside), else its COMMIT file's, else unknown."""
    missing = [d for d in SOURCE_DIRS if not (root / d).is_dir()]
    missing += [f for f in RUNTIME_FILES if not (root / f).is_file()]
    if missing:
        raise ValueError(f"--{label}-tree {root}: expected a copy of the repository's sources, "
                         f"missing {', '.join(missing)}")
    commit = named_commit(root)
    if (root / ".git").exists():
        try:
            commit = git("rev-parse", "HEAD", cwd=root)
        except (OSError, subprocess.CalledProcessError):
            pass
    return Tree(label, root.resolve(), commit)


# ---- one tree ---------------------------------------------------------------------------
PROBE = """
import importlib.util, json
out = {"env_step": importlib.util.find_spec("unilab_bench.env_step") is not None,
       "collector": None, "tasks": None,
       "reference_tracking": importlib.util.find_spec("unilab_bench.reference_tracking") is not None}
for module in ("unilab_bench.collector", "unilab_rl.cli.bench"):  # its home now, and before the bench member
    try:
        if importlib.util.find_spec(module) is not None:
            out["collector"] = "unilab_bench.cli" if module == "unilab_bench.collector" else module
            break
    except ImportError:
        pass
if out["env_step"]:  # the flag that turns its comparison owner off (renamed from --unfused-task)
    source = open(importlib.util.find_spec("unilab_bench.env_step").origin).read()
    out["compare_flag"] = "--compare-task" if "--compare-task" in source else "--unfused-task"
try:
    from unilab.registry import list_tasks
    out["tasks"] = sorted(list_tasks())
except Exception as error:  # an old tree: tasks unknown, runs will tell
    out["error"] = repr(error)
print(json.dumps(out))
"""


@dataclass
class Tree:
    label: str  # "head" or "base"
    root: Path
    commit: str

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(self.root / d) for d in SOURCE_DIRS]
        paths += [str(self.root / d) for d in OPTIONAL_SOURCE_DIRS if (self.root / d).is_dir()]
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        return env

    def probe(self) -> dict[str, Any]:
        done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=self.env(),
                              cwd=self.root, timeout=300)
        if done.returncode:
            return {"env_step": False, "collector": False, "tasks": None, "error": done.stderr[-2000:]}
        return json.loads(done.stdout.strip().splitlines()[-1])
