"""Stopping a run on SIGINT or SIGTERM: finish the step, save a checkpoint, exit 128 + signal."""

from __future__ import annotations

import signal
import sys
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # both: finish the step, save, exit 128 + signal


class StopOnSignal:
    """SIGINT and SIGTERM: the first asks the runner to finish the step, save and stop
    (exit 130 / 143); a second one of the same kind falls back to that signal's default."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.received: int | None = None
        self.previous = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}

    def _handle(self, signum: int, _frame: Any) -> None:
        self.runner.request_stop()
        if self.received is None:
            self.received = signum
        previous = self.previous[signum]
        fallback = signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
        signal.signal(signum, previous if callable(previous) else fallback)
        name = "interrupt" if signum == signal.SIGINT else "termination request"
        print(f"\nunilab-train: {name} received; saving a checkpoint and stopping", file=sys.stderr)

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    @property
    def exit_code(self) -> int:
        return 128 + (self.received or signal.SIGINT)
