"""A SIGINT before the training loop's handler is installed ends the process (exit 130, nothing trained).

Python's default SIGINT handler raises KeyboardInterrupt wherever the main thread is; during
the first fraction of a second that is inside ``import torch`` (and later lazy imports), where
some module's broad ``except`` can swallow it, and the run then trained to the end. So a
training command installs ``_note`` first of all (on importing this module, which
``unilab_rl``'s ``__init__`` does before anything imports torch): it only records the signal. ``check`` ends the
process with 130 once the signal is recorded; the training command calls it between its
start-up steps, and ``settle`` (a last check, then Python's default handler back) just before
the loop's own handler (``StopOnSignal``) takes over. Where ``install`` did not run (the
modules imported by a test or a library), both do nothing.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

EXIT_INTERRUPTED = 130
# The programs whose start-up this guards: the console script and ``python -m`` (torchrun's ranks).
PROGRAMS = ("unilab-train",)
MODULES = ("unilab_rl.cli.train",)

_installed = False
_received = False


def is_training_program(argv: list[str], orig_argv: list[str]) -> bool:
    if argv and Path(argv[0]).name in PROGRAMS:
        return True
    return any(flag == "-m" and module in MODULES for flag, module in zip(orig_argv, orig_argv[1:], strict=False))


def _note(_signum: int, _frame: Any) -> None:
    global _received
    if not _received:
        print("\nunilab-train: interrupt received during start-up; stopping before training", file=sys.stderr,
              flush=True)
    _received = True


def install() -> None:
    """Record SIGINT instead of raising KeyboardInterrupt, when this process is a training command
    and SIGINT still has Python's default handler."""
    global _installed
    if _installed or not is_training_program(sys.argv, getattr(sys, "orig_argv", [])):
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _note)
            _installed = True
    except ValueError:  # not the main thread
        pass


def check() -> None:
    """End the process (exit 130) if a SIGINT arrived during start-up."""
    if _installed and _received:
        raise SystemExit(EXIT_INTERRUPTED)


def settle() -> None:
    """A last ``check``, then Python's default SIGINT handler back (for the loop's handler to chain to)."""
    global _installed
    check()
    if _installed:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _installed = False


install()  # on import, from unilab_rl's __init__, before torch
