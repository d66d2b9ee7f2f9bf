"""How long this process has been alive (the imports before a command's own start-up clock),
and whether its Python keeps compiled modules (which those imports' time depends on).

``unilab-train`` times its start-up from the parsed command; what comes before it (the
interpreter, torch and the packages being imported) only the operating system saw begin. Linux
keeps each process's start time in ``/proc``; elsewhere the age is not known and callers say so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_STAT = Path("/proc/self/stat")
_UPTIME = Path("/proc/uptime")
# Fields of /proc/self/stat after the parenthesised command name (which may hold spaces): the
# state is field 3 of the whole line, the start time (clock ticks after boot) field 22.
_START_TICKS_AFTER_NAME = 22 - 3


def seconds_since_process_start() -> float | None:
    """Seconds since this process started (to the kernel clock's 10 ms), or None without /proc."""
    try:
        stat = _STAT.read_text()
        uptime_s = float(_UPTIME.read_text().split()[0])
    except OSError:
        return None
    start_ticks = int(stat.rsplit(")", 1)[1].split()[_START_TICKS_AFTER_NAME])
    return max(0.0, uptime_s - start_ticks / os.sysconf("SC_CLK_TCK"))


def python_writes_bytecode() -> bool:
    """Whether this interpreter caches compiled modules (``PYTHONDONTWRITEBYTECODE`` and ``-B``
    turn it off). Without the cache every launch compiles the sources of torch and the other
    imports again, which on an H200 machine added about 6 s to a warm start-up."""
    return not sys.flags.dont_write_bytecode
