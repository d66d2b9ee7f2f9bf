"""Run directories are owned: one live run per directory, and a new run never replaces an old one.

``check_run_dir`` (read-only, with the other argument checks) refuses an ``--out`` that a
live run holds, or that holds a finished run unless the command resumes that run's own
checkpoint or passes ``--overwrite``. ``claim_run_dir`` (once every check has passed, just
before the first write) creates the directory, takes its lock, checks again under the lock
(two starts racing for one directory), removes the temporary files of a save that a killed
run left, and with ``--overwrite`` removes the old run's files.

The lock is ``flock`` on ``OUT/.unilab-train.lock``: the kernel releases it when its holder
exits however it exits (kill -9 included), so a lock file left behind is stale by
definition and never blocks a new run. The file names the holder (pid, host, start time)
for the error message; a run that ends removes it (after checking, once locked, that the
path still names the file it locked, so a removal never lets two runs hold two files). ``flock`` is advisory and per host: it does not stop a run on
another machine that mounts the same directory.

Links: a run writes its files itself. A symbolic link where one of them goes (the lock, a run
file, a snapshot) is refused with the other checks, and the files opened in place (the lock,
``metrics.jsonl``) are opened with ``O_NOFOLLOW``, so a link planted after the checks is refused
too instead of having its target written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import socket
import time
from pathlib import Path

LOCK_NAME = ".unilab-train.lock"
# What makes a directory hold a run (written by unilab-train and nothing else): these names,
# and the snapshots kept beside the checkpoint (runner.snapshot_at_s / snapshot_at_steps).
RUN_FILES = ("checkpoint.pt", "metrics.jsonl", "summary.json", "tensorboard", "run.json")
SNAPSHOT_GLOB = "checkpoint-*.pt"
STALE_SAVE_GLOB = ".checkpoint*.pt.*.tmp"  # checkpoint.save_checkpoint's temporary files, snapshots' too


class RunDirError(ValueError):
    """--out cannot take this run; the message says why and what to do."""


def check_writable(path: Path, flag: str) -> None:
    """``path`` (a directory to create, or a file's parent) can be created and written,
    without creating anything: the nearest existing ancestor is a writable directory."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise RunDirError(f"{flag} {path} is not writable: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise RunDirError(f"{flag} {path} is not writable: permission denied on {probe}")


def check_file_target(path: Path, flag: str, out: Path | None = None) -> None:
    """``path`` can become a file: not a directory, not a run's own file (in ``out``, this
    command's run directory, or in a directory that holds a run: writing there would destroy
    that run's checkpoint or records), not an existing path other than a regular file (a link, a
    FIFO, a device node: the atomic write's rename would replace it), and its directory can be written."""
    if path.is_symlink() or (path.exists() and not path.is_dir() and not path.is_file()):
        what = "a symbolic link" if path.is_symlink() else "a special file (FIFO, device or socket)"
        raise RunDirError(f"{flag} {path} is not a regular file but {what}, which writing would replace; "
                          "give a new path or a regular file")
    if path.is_dir():
        raise RunDirError(f"{flag} {path} is a directory; give a file path")
    in_a_run = (out is not None and path.parent.resolve() == out.resolve()) or bool(run_files(path.parent))
    if in_a_run and (is_run_file_name(path.name) or path.name == LOCK_NAME):
        raise RunDirError(f"{flag} {path} would replace a run's own file ({path.name}); give another file name")
    check_writable(path.parent, flag)


def open_run_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """A file descriptor of ``path`` opened with ``O_NOFOLLOW`` (and ``O_CLOEXEC``): a link there
    raises RunDirError instead of being followed to a file outside the run directory."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RunDirError(linked_message(path)) from None
        raise


def linked_message(path: Path) -> str:
    return (f"--out: {path} is a symbolic link (to {os.readlink(path)}); a run writes its files itself, "
            "never through a link: remove the link or choose another --out")


def check_no_links(out: Path) -> None:
    """Refuse a symbolic link where a run writes one of its files."""
    if not out.is_dir():
        return
    names = [LOCK_NAME, *RUN_FILES, *sorted(path.name for path in out.glob(SNAPSHOT_GLOB))]
    for name in names:
        if (out / name).is_symlink():
            raise RunDirError(linked_message(out / name))


def is_run_file_name(name: str) -> bool:
    return name in RUN_FILES or Path(name).match(SNAPSHOT_GLOB)


def run_files(out: Path) -> list[str]:
    """The run files in ``out`` (``tensorboard`` a directory, the others files), snapshots last."""
    named = [name for name in RUN_FILES
             if ((out / name).is_dir() if name == "tensorboard" else (out / name).is_file())]
    return named + sorted(path.name for path in out.glob(SNAPSHOT_GLOB) if path.is_file())


def lock_holder(out: Path) -> str | None:
    """Who holds ``out``'s lock (pid, host, start), or None when no live run does."""
    lock = out / LOCK_NAME
    try:
        stream = os.fdopen(os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "r")
    except OSError:  # none, or a link (which check_no_links refuses)
        return None
    with stream:
        try:
            fcntl.flock(stream, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return stream.read().strip() or "unknown process"
        fcntl.flock(stream, fcntl.LOCK_UN)
    return None


def check_run_dir(out: Path, resume: Path | None, overwrite: bool, locked_by_us: bool = False) -> None:
    """Refuse ``--out`` when a live run holds it, or when it holds a run this command would
    replace; reads only."""
    check_writable(out, "--out")
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out} is a file, not a directory")
    check_no_links(out)
    holder = None if locked_by_us else lock_holder(out)
    if holder is not None:
        raise RunDirError(f"--out {out} is in use by a live run ({holder}); wait for it to end or choose "
                          "another --out")
    existing = run_files(out)
    if not existing or overwrite:
        return
    own = out / "checkpoint.pt"
    if resume is not None and resume.resolve() == own.resolve():
        return  # continuing this directory's own run (a snapshot of it would overwrite the newer checkpoint)
    hint = f"continue it with --resume {own}, " if own.exists() else ""
    raise RunDirError(f"--out {out} already holds a run ({', '.join(existing)}); {hint}choose another --out, "
                      "or pass --overwrite to replace it")


class RunDirLock:
    """The held lock of one run directory; ``release`` (or process exit) frees it."""

    def __init__(self, out: Path) -> None:
        self.path = out / LOCK_NAME
        while True:
            self.stream = os.fdopen(open_run_file(self.path, os.O_RDWR | os.O_CREAT), "r+")
            try:
                fcntl.flock(self.stream, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                self.stream.seek(0)
                holder = self.stream.read().strip() or "unknown process"
                self.stream.close()
                raise RunDirError(f"--out {out} is in use by a live run ({holder}); wait for it to end or choose "
                                  "another --out") from None
            if self._still_named():
                break
            self.stream.close()  # its holder removed it between our open and our lock: lock the new one
        self.stream.seek(0)
        self.stream.truncate()
        self.stream.write(f"pid {os.getpid()} on {socket.gethostname()}, started "
                          f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        self.stream.flush()

    def _still_named(self) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(self.stream.fileno()).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if not self.stream.closed:
            self.path.unlink(missing_ok=True)  # still locked: a starter that opened it retries on the new file
            fcntl.flock(self.stream, fcntl.LOCK_UN)
            self.stream.close()


def claim_run_dir(out: Path, resume: Path | None, overwrite: bool) -> RunDirLock:
    """Create ``out`` and lock it for this run; check again under the lock; clean what a
    killed save left and, with ``overwrite``, the old run's files."""
    out.mkdir(parents=True, exist_ok=True)
    lock = RunDirLock(out)
    try:
        check_run_dir(out, resume, overwrite, locked_by_us=True)  # a run that started since the first check
        for stale in out.glob(STALE_SAVE_GLOB):  # no live run writes here: we hold the lock
            stale.unlink(missing_ok=True)
        if overwrite:
            for name in run_files(out):
                target = out / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                else:
                    target.unlink()
    except BaseException:
        lock.release()
        raise
    return lock
