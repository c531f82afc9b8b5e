"""Run a command under a hard timeout, with bounded output and no process of it left behind afterwards."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Mapping, Sequence

import attrs

#: Environment variables never handed to candidate processes (LLM provider keys and the like).
#: Matched case-insensitively anywhere in the name: "_KEY" covers provider keys (OPENAI_API_KEY,
#: AWS_ACCESS_KEY_ID ...), "CREDENTIAL" credential files (GOOGLE_APPLICATION_CREDENTIALS).
SECRET_MARKERS = ("_KEY", "_TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "LITELLM", "OPENAI", "ANTHROPIC",
                  "AWS_", "AZURE_", "VERTEX")

#: prctl option that makes a process adopt the orphans of its descendants (Linux).
PR_SET_CHILD_SUBREAPER = 36
#: Variables that keep NVLink multicast off: enabling it can take shared GPUs out of service.
SAFE_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


#: Bytes of each stream kept at its start and at its end; the middle of longer output is counted, not kept.
KEEP_BYTES = 64 * 1024
_REAPER = str(Path(__file__).with_name("reaper.py"))
#: Seconds to wait for the output pipes to close once the launcher has exited.
_DRAIN_S = 1.0


@attrs.frozen
class ProcessOutcome:
    """How a command run by `run_group` ended: its status (None when killed for the timeout) and output.

    Output is decoded as UTF-8 with undecodable bytes replaced; of a long stream only the first and last
    KEEP_BYTES are kept, with "[... N bytes dropped ...]" between them and N in `*_dropped`.
    """

    returncode: int | None      # None when killed for the timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    stdout_dropped: int = 0
    stderr_dropped: int = 0


class _Capture:
    """A bounded record of one output stream: its head, its tail, and how many bytes fell between."""

    def __init__(self, keep: int):
        self.keep, self.head, self.tail, self.dropped = keep, bytearray(), bytearray(), 0

    def feed(self, data: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.keep:  # trimmed in steps: amortised O(1) per byte, at most 3x keep held
            self._trim()

    def _trim(self) -> None:
        cut = len(self.tail) - self.keep
        if cut > 0:
            self.dropped += cut
            del self.tail[:cut]

    def text(self) -> str:
        self._trim()
        if not self.dropped:
            return bytes(self.head + self.tail).decode("utf-8", "replace")
        return (self.head.decode("utf-8", "replace") + f"\n[... {self.dropped} bytes dropped ...]\n"
                + self.tail.decode("utf-8", "replace"))


#: Password and authentication names as words of the name: DB_PASS, SMTP_PASSWD, GPG_PASSPHRASE, PROXY_AUTH,
#: NCCL_AUTHORIZATION (as words, so that NCCL_P2P_BYPASS or a *_PATH stay what they are).
_SECRET_WORDS = re.compile(r"(?:^|_)(?:PASS|PASSWD|PASSPHRASE|PWD|AUTH\w*)(?:_|$)")


def is_secret(name: str) -> bool:
    """True for environment variable names that may hold credentials (see SECRET_MARKERS)."""
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS) or (upper != "PWD" and _SECRET_WORDS.search(upper) is not None)


#: What a candidate-facing process (nvcc, the harness, a transformed program) may inherit: an allow-list,
#: because a name pattern cannot know every provider's key name (WATSONX_APIKEY, SNOWFLAKE_JWT, ...).
ALLOWED_ENV_NAMES = frozenset("""
    PATH HOME USER LOGNAME SHELL PWD LANG LANGUAGE TZ TERM TMPDIR TMP TEMP
    LD_LIBRARY_PATH LIBRARY_PATH CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH CC CXX CUDAHOSTCXX
    NVCC_PREPEND_FLAGS NVCC_APPEND_FLAGS
""".split())
ALLOWED_ENV_PREFIXES = ("LC_", "CUDA_", "NCCL_", "NVSHMEM_", "CUCO_", "CUBLAS", "CUDNN_", "TORCH_SYMM_MEM_",
                        "OMPI_", "PMIX_", "PMI_", "SLURM_")


def is_allowed(name: str) -> bool:
    """True for variables a candidate-facing process may inherit (see ALLOWED_ENV_NAMES/PREFIXES)."""
    return (name in ALLOWED_ENV_NAMES or name.startswith(ALLOWED_ENV_PREFIXES)) and not is_secret(name)


class ScrubbedEnv(dict):
    """An environment scrubbed_env built: run_group passes it as it is, so that what the caller set on purpose
    (WORLD_SIZE, RANK, ...) is not dropped by a second pass of the allow-list."""


def scrubbed_env(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> ScrubbedEnv:
    """The allow-listed part of `base` (default: the environment) plus `extra` (what the caller sets on
    purpose, secrets still dropped), with NVLink multicast off."""
    env = ScrubbedEnv((k, v) for k, v in (base if base is not None else os.environ).items() if is_allowed(k))
    env.update({k: v for k, v in (extra or {}).items() if not is_secret(k)})
    env.update(SAFE_GPU_ENV)
    return env


def _check_executable(program: str, env: Mapping[str, str], cwd: Path | None) -> None:
    """Raise FileNotFoundError / PermissionError for a program that cannot start, as Popen would."""
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() or cwd is None else Path(cwd) / program
        if not path.is_file():
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", program)
        if not os.access(path, os.X_OK):
            raise PermissionError(errno.EACCES, "Permission denied", program)
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory (not on PATH)", program)


def _pump(proc: subprocess.Popen, captures: dict[int, _Capture], deadline: float, grace_s: float) -> bool:
    """Read both pipes into their captures until they close; True when the deadline passed (the launcher was
    told to stop the command). Never blocks past the deadline plus the kill's grace."""
    timed_out, hard_stop, drain_until = False, None, None
    with selectors.DefaultSelector() as sel:
        for fd in captures:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            now = time.monotonic()
            if not timed_out and now >= deadline:
                timed_out, hard_stop = True, now + grace_s + 10.0
                _signal(proc.pid, signal.SIGTERM)  # the launcher stops the command's whole tree
            if drain_until is None and proc.poll() is not None:
                drain_until = now + _DRAIN_S  # pipes still open after the launcher ended: a survivor holds them
            limits = [t for t in (hard_stop if timed_out else deadline, drain_until) if t is not None]
            if now >= min(limits) and (timed_out or drain_until is not None):
                break
            for key, _ in sel.select(max(0.0, min(min(limits) - now, 0.5))):
                data = os.read(key.fd, 1 << 16)
                if data:
                    captures[key.fd].feed(data)
                else:
                    sel.unregister(key.fd)
    return timed_out


def _signal(pid: int, sig: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except ProcessLookupError:
        pass


#: The launchers this process runs now: its own children in a session of their own, never taken for orphans.
_LAUNCHERS: set[int] = set()
_LAUNCHERS_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _subreaper() -> bool:
    """Make this process a child subreaper (once): when a candidate kills its launcher, the launcher's orphans,
    setsid daemons included, become children of this process instead of init's, so they can still be found."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _kill_orphans(since_ticks: int, within_s: float = 10.0) -> None:
    """Kill the orphans a dead launcher left to this process, in rounds (each killed process hands its own
    children to us): children of ours in another session than ours, started after that launcher, that are not a
    live launcher. Ordinary children (nvidia-smi, ...) stay in our session."""
    from cuco.reaper import children_of, proc_stat  # noqa: PLC0415 (the launcher's own /proc reading)

    me, my_session = os.getpid(), os.getsid(0)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        with _LAUNCHERS_LOCK:
            launchers = set(_LAUNCHERS)
        victims = []
        for pid in children_of(me):
            st = proc_stat(pid)
            if st is not None and pid not in launchers and st[1] != my_session and st[2] >= since_ticks:
                victims.append(pid)
        if not victims:
            return
        for pid in victims:
            _signal(pid, signal.SIGKILL)
        for pid in victims:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _finish(proc: subprocess.Popen, grace_s: float) -> None:
    """Make sure the launcher (and through it the command's tree) is gone: SIGTERM, then SIGKILL its group."""
    if proc.poll() is None:
        _signal(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s + 10.0)
        except subprocess.TimeoutExpired:
            _signal(proc.pid, signal.SIGKILL, group=True)
            proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f is not None:
            f.close()


def run_group(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
              cwd: Path | None = None, grace_s: float = 2.0, scratch: Path | None = None) -> ProcessOutcome:
    """Run argv under a hard timeout; on timeout SIGTERM, then after grace_s SIGKILL, its whole process tree.

    Nothing the command started outlives this call, on any exit path (normal exit, timeout, an exception
    here, or this process being killed): argv runs under a small launcher (cuco/reaper.py) that is a child
    subreaper. Output is read as bytes and kept bounded (see ProcessOutcome). The child's environment is
    `env` as scrubbed_env made it (what the caller added stays), else the allow-listed part of `env` (default:
    this process's); secrets are always dropped and NVLink multicast is off. `scratch`, a folder of the command's
    temp files, is removed by the launcher once the command's tree is gone, even when this process is killed.
    """
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("run_group needs a command")
    child_env = scrubbed_env({}, env) if isinstance(env, ScrubbedEnv) else scrubbed_env(env)
    _check_executable(argv[0], child_env, cwd)
    subreaper = _subreaper()
    start = time.monotonic()
    with _LAUNCHERS_LOCK:  # registered before a concurrent call's orphan scan could see it unregistered
        remove = ["--remove", str(scratch)] if scratch is not None else []
        proc = subprocess.Popen([sys.executable, "-I", "-S", _REAPER, str(os.getpid()), f"{grace_s:g}", *remove, "--",
                                 *argv],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=child_env, cwd=cwd, start_new_session=True)
        _LAUNCHERS.add(proc.pid)
    from cuco.reaper import proc_stat  # noqa: PLC0415

    launched = proc_stat(proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(KEEP_BYTES), _Capture(KEEP_BYTES)
    try:
        timed_out = _pump(proc, {proc.stdout.fileno(): out, proc.stderr.fileno(): err}, start + timeout_s, grace_s)
    finally:
        _finish(proc, grace_s)
        with _LAUNCHERS_LOCK:
            _LAUNCHERS.discard(proc.pid)
        # A launcher that ends by a signal may have been killed by the command (it ends like the command
        # otherwise, which is the common case of a signal): what it left is ours now, and goes
        if subreaper and launched is not None and (proc.returncode or 0) < 0:
            _kill_orphans(launched[2])
    return ProcessOutcome(None if timed_out else proc.returncode, out.text(), err.text(), time.monotonic() - start,
                          timed_out, out.dropped, err.dropped)
