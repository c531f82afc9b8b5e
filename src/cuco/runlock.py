"""One writer per run directory: an advisory lock (flock) on run_dir/lock, held for the writer's whole run.

flock is released by the kernel when its holder dies, SIGKILL included, so a crashed run never leaves a
stale lock behind. Readers (a report, a notebook, CandidateDB) take no lock and are never blocked: SQLite's
WAL keeps their view consistent while the writer works. The lock is re-entrant within one process (the
run holds it around the search, which takes it again), never across processes.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Iterator
from contextlib import contextmanager

from cuco.errors import CucoError

LOCK_FILE = "lock"

_held: dict[str, list] = {}  # realpath of the lock file -> [fd, depth]
_guard = threading.Lock()


class RunLockedError(CucoError):
    """Another process is writing to this run directory."""


def _holder(fd: int) -> str:
    """Who holds the lock: the pid its holder writes right after taking it. A loser can read in the instant between
    the two (an empty file), so an empty read is retried for up to 0.1 s before the holder goes unnamed."""
    text = ""
    for _ in range(20):
        try:
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            break
        if text:
            break
        time.sleep(0.005)
    return f"process {text}" if text.isdigit() else "another process"


def acquire(run_dir: Path) -> None:
    """Take the run's write lock (re-entrant in this process); RunLockedError naming the holder if taken."""
    path = os.path.realpath(Path(run_dir) / LOCK_FILE)
    with _guard:
        if path in _held:
            _held[path][1] += 1
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunLockedError(f"{run_dir} is being written by {holder} (a cuco run on the same directory); "
                                 "wait for it to end or stop it; reading the run (report, CandidateDB) needs "
                                 "no lock") from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[path] = [fd, 1]


def release(run_dir: Path) -> None:
    """Give back one acquire(); the lock is released when the outermost one is given back."""
    path = os.path.realpath(Path(run_dir) / LOCK_FILE)
    with _guard:
        entry = _held.get(path)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            del _held[path]
            os.close(entry[0])  # closing the last descriptor releases the flock


@contextmanager
def held(run_dir: Path) -> Iterator[None]:
    """`with held(run_dir):` the write lock for the block."""
    acquire(run_dir)
    try:
        yield
    finally:
        release(run_dir)


def is_held(run_dir: Path) -> bool | None:
    """Whether some process holds the run's write lock (a run is writing), read from /proc/locks without taking
    the lock (a reader that took it, even for an instant, could make a starting writer fail); None where the
    kernel does not say (no /proc/locks)."""
    try:
        st = os.stat(Path(run_dir) / LOCK_FILE)
    except FileNotFoundError:
        return False  # no writer ever locked it
    try:
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(f.split()[1:2] == ["FLOCK"] and inode in f.split() for f in locks.splitlines())
