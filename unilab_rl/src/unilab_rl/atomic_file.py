"""Write a file so that a crash leaves either the old file or the whole new one.

The content goes to a unique temporary file in the destination's folder (same filesystem, so
the rename is atomic), is flushed and fsynced, then ``os.replace``d over the destination.

A full disk is reported as ``DiskFull`` naming the destination: both as the OSError (ENOSPC)
a plain write raises and as the RuntimeError torch.save's zip writer raises for the same short
write (``[enforce fail at inline_container.cc:...] unexpected pos ...``), which buries it.
The destination keeps its earlier content; the temporary file is removed.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TORCH_SHORT_WRITE = ("unexpected pos", "PytorchStreamWriter failed writing")  # torch.save's zip writer


class DiskFull(OSError):
    """No space left on the device while writing ``path`` (whose earlier content is intact)."""

    def __init__(self, path: Path) -> None:
        super().__init__(errno.ENOSPC, f"no space left on device writing {path}")
        self.path = path

    def __str__(self) -> str:
        kept = " (it keeps its earlier content)" if self.path.exists() else ""
        return f"no space left on device writing {self.path}{kept}; free some space, then resume or run again"


def write_atomically(path: Path, write: Callable[[BinaryIO], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException as error:
        Path(temp_name).unlink(missing_ok=True)
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT) \
                and not isinstance(error, DiskFull):
            raise DiskFull(path) from error
        if isinstance(error, RuntimeError) and any(text in str(error) for text in TORCH_SHORT_WRITE):
            raise DiskFull(path) from error
        raise
