"""Backend scope, read from workspace.toml (the single place it is written)."""

from __future__ import annotations

import functools
import tomllib
from pathlib import Path
from typing import NamedTuple


class BackendScope(NamedTuple):
    active: tuple[str, ...]
    shelved: tuple[str, ...]


def workspace_file() -> Path:
    """The workspace.toml above this package (unisim is installed editable from the workspace)."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "workspace.toml"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"workspace.toml not found above {Path(__file__).resolve()}; unisim runs from a UniLab "
        "workspace checkout (make install)")


@functools.cache
def backend_scope() -> BackendScope:
    data = tomllib.loads(workspace_file().read_text())
    backends = data["backends"]
    return BackendScope(tuple(backends["active"]), tuple(backends["shelved"]))
