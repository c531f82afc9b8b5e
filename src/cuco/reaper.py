"""Launcher that runs one command and leaves none of its descendants alive, however the command ends.

Run as `python -I -S reaper.py PARENT_PID GRACE_S [--remove DIR] -- ARGV...` by `cuco.process.run_group`;
stdlib only. DIR (the command's scratch folder) is removed once the command's tree is gone, on every exit path.

Why a subreaper (prctl PR_SET_CHILD_SUBREAPER) and not a process-group kill or a /proc scan for a marker:
a process group or session is left by one `setsid()`, and an environment marker is dropped by `env -i` or
overwritten in memory, so a hostile candidate can escape both. A subreaper cannot be escaped: every orphan
below it, double-forked daemons in new sessions included, is re-parented to it. After the command exits
(or on SIGTERM: the caller's timeout, or PR_SET_PDEATHSIG when the caller dies), the launcher kills its
children until it has none left; since every orphaned descendant becomes its child, "no child" means "no
descendant". The exit status is the command's (a signal is re-raised), so callers see the command itself.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class _Stop(Exception):
    """SIGTERM arrived: the caller timed out or died."""


def _stop(_sig: int, _frame: object) -> None:
    raise _Stop


def proc_stat(pid: int | str) -> tuple[int, int, int] | None:
    """(parent pid, session id, start time in clock ticks after boot) of `pid` from /proc/PID/stat, or None
    when it is gone (the comm field may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    if len(fields) < 20:
        return None
    return int(fields[1]), int(fields[3]), int(fields[19])


def children_of(me: int) -> list[int]:
    """Pids whose parent is `me`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(name)
            if st is not None and st[0] == me:
                found.append(int(name))
    return found


def _signal_all(pgid: int, sig: int) -> None:
    """Signal the command's process group and every child of ours (orphans re-parented here included)."""
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass
    for pid in children_of(os.getpid()):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _reap_until_none(pgid: int, grace_s: float) -> None:
    """SIGTERM everything, wait up to grace_s, then SIGKILL in rounds until no child is left."""
    if grace_s > 0:
        _signal_all(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    time.sleep(0.02)
            except ChildProcessError:
                return
    while True:
        _signal_all(pgid, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)  # one dead child: its own orphans are ours now, the next round kills them
        except ChildProcessError:
            return


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the command already dumped core if it was to
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    """Run the command in `argv` (PARENT_PID GRACE_S [--remove DIR] -- ARGV...), then kill what it left and remove
    DIR; exits with its status."""
    cut = argv.index("--")
    parent, grace_s, cmd = int(argv[1]), float(argv[2]), argv[cut + 1:]
    options = argv[3:cut]
    remove = options[options.index("--remove") + 1] if "--remove" in options else None
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the process-group kill below still takes the ordinary descendants
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            os.execvp(cmd[0], cmd)
        except BaseException as exc:  # noqa: BLE001 - anything here must end this child, never return
            os.write(2, f"cuco: cannot run {cmd[0]}: {exc}\n".encode(errors="replace"))
        os._exit(127)
    try:
        os.setpgid(pid, pid)  # also here: whichever of the two runs first, the group exists before a kill
    except OSError:
        pass
    status = None
    try:
        if os.getppid() != parent:  # the caller died before PR_SET_PDEATHSIG was in place
            raise _Stop
        while status is None:
            done, st = os.waitpid(-1, 0)
            if done == pid:
                status = st
    except _Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        _reap_until_none(pid, grace_s)
        _remove(remove)
        os._exit(128 + signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _reap_until_none(pid, 0.0)  # the command is done: whatever it left behind goes now
    _remove(remove)
    _exit_like(status)


def _remove(folder: str | None) -> None:
    # the command's scratch folder, removed here once nothing writes to it: also when the caller was killed
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
