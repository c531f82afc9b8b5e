"""Start W copies of a program as torchrun would, for a program that a launcher starts (it reads its rank from the
environment and starts no process itself):

    python rank_launch.py --world W -- PROGRAM [ARGS...]

Each copy gets torchrun's variables: RANK = LOCAL_RANK = r, WORLD_SIZE = LOCAL_WORLD_SIZE = W, GROUP_RANK = 0,
MASTER_ADDR = 127.0.0.1 and a MASTER_PORT free at this start (the kernel's choice, so a new one at almost every
start: what a program keeps under its port, such as a file holding the NCCL unique id, is not an earlier run's).
When a copy fails, the others get `--grace-s` to end and are then killed. The exit code is the first failing copy's
(128 + N for a signal N; 0: none failed), and that copy is named on stderr.

Standard library only: it runs under the scrubbed environment cuco gives a program's run, with no PYTHONPATH.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Mapping

try:   # the harness's launcher waits for its ranks the same way
    from cuco.harness.ranks import wait_ranks
except ImportError:   # run by path without the package (-I -S), as cuco runs it: both are standard-library scripts
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "harness"))
    from ranks import wait_ranks  # noqa: E402

GRACE_S = 5.0


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(base: Mapping[str, str], rank: int, world: int, port: int) -> dict[str, str]:
    """The environment of copy `rank` of `world`: `base` plus torchrun's variables."""
    return {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(world), "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def exit_code(returncode: int) -> int:
    """A shell's exit code for a child's return code (a signal N as 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def launch(argv: list[str], world: int, grace_s: float = GRACE_S) -> int:
    """Run `world` copies of `argv` and wait for them; the exit code of the first that failed, else 0."""
    port = free_port()
    procs = [subprocess.Popen(argv, env=rank_env(os.environ, r, world, port), stdin=subprocess.DEVNULL)
             for r in range(world)]

    def stop(signum: int, _frame: object) -> None:   # the caller's timeout: every copy goes too
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    first = wait_ranks(procs, grace_s)
    if first is None:
        return 0
    print(f"rank {first} of {world} exited with status {exit_code(procs[first].returncode)}", file=sys.stderr)
    return exit_code(procs[first].returncode) or 1


def main(args: list[str] | None = None) -> int:
    """Command line: --world W [--grace-s S] -- PROGRAM [ARGS...]."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--grace-s", type=float, default=GRACE_S)
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    ns = ap.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if ns.world < 1 or not argv:
        ap.error("needs --world >= 1 and a program after --")
    return launch(argv, ns.world, ns.grace_s)


if __name__ == "__main__":
    sys.exit(main())
