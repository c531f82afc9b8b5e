"""Run a command in its own process group with a hard timeout that kills the whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Mapping, Sequence

import attrs

#: Environment variables never handed to candidate processes (LLM provider keys and the like).
#: Matched case-insensitively anywhere in the name: "_KEY" covers provider keys (OPENAI_API_KEY,
#: AWS_ACCESS_KEY_ID ...), "CREDENTIAL" credential files (GOOGLE_APPLICATION_CREDENTIALS).
SECRET_MARKERS = ("_KEY", "_TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "LITELLM", "OPENAI", "ANTHROPIC",
                  "AWS_", "AZURE_", "VERTEX")

#: Variables that keep NVLink multicast off: enabling it can take shared GPUs out of service.
SAFE_GPU_ENV = {"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}


@attrs.frozen
class ProcessOutcome:
    """How a command run by `run_group` ended: its status (None when killed for the timeout) and output."""

    returncode: int | None      # None when killed for the timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


def is_secret(name: str) -> bool:
    """True for environment variable names that may hold credentials (see SECRET_MARKERS)."""
    upper = name.upper()
    return any(m in upper for m in SECRET_MARKERS)


def scrubbed_env(base: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default: the environment) plus `extra`, without secrets, with NVLink multicast off."""
    env = {k: v for k, v in {**(base if base is not None else os.environ), **(extra or {})}.items()
           if not is_secret(k)}
    env.update(SAFE_GPU_ENV)
    return env


def run_group(argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None = None,
              cwd: Path | None = None, grace_s: float = 2.0) -> ProcessOutcome:
    """Run argv in a new session; on timeout SIGTERM then SIGKILL the whole process group.

    The child's environment is `env` (default: this process's), always scrubbed of secrets and with
    NVLink multicast off, whatever the caller passed.
    """
    start = time.monotonic()
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=scrubbed_env(env), cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return ProcessOutcome(proc.returncode, out, err, time.monotonic() - start, False)
    except subprocess.TimeoutExpired:
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                out, err = proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            out, err = "", ""
        return ProcessOutcome(None, out or "", err or "", time.monotonic() - start, True)
