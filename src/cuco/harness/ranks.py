"""Process-per-rank launch of cuco-harness: one process per rank, one result file back.

    python ranks.py --world W -- HARNESS_ARGV... --out RESULT.json

Starts W harness processes with `--rank r --rendezvous DIR --out DIR/rank<r>.json`; rank 0 publishes the NCCL
unique id and a loopback port in DIR and the others join it (csrc/harness/star.h). When a rank process fails,
the others get `grace_s` to notice (a peer's closed socket ends them at once; a hung one waits for its own
watchdog) and are then killed. RESULT.json is rank 0's result, or, if rank 0 never finished, the result of the
rank that failed first (it names the cause). The exit code is that of the first rank to fail (0: none failed).

Standard library only: it runs under the scrubbed environment that cuco gives the harness, with no PYTHONPATH.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GRACE_S = 15.0


def rank_argv(harness_argv: list[str], rank: int, rendezvous: Path) -> list[str]:
    """The harness command of one rank: its own --out in the rendezvous folder, plus --rank/--rendezvous."""
    argv = list(harness_argv)
    if "--out" not in argv[:-1]:
        raise ValueError("the harness command needs --out RESULT.json")
    i = argv.index("--out")
    argv[i + 1] = str(rendezvous / f"rank{rank}.json")
    return argv + ["--rank", str(rank), "--rendezvous", str(rendezvous)]


def _load(path: Path) -> dict[str, Any] | None:
    """A rank's result, or None when it wrote none or something that is not a result (`[]`, a number, half a
    file): a rank's process is a candidate's, and what it leaves must not crash the launcher."""
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) else None


def choose_result(results: list[dict[str, Any] | None], first_failed: int | None) -> int | None:
    """Which rank's result stands for the group: rank 0's when it finished (it holds every rank's times and
    checks), else the first failing rank's when it finished, else whichever finished, else the first snapshot."""
    finished = [r is not None and r.get("status") not in (None, "running") for r in results]
    if results and finished[0] and (first_failed is None or results[0].get("status") != "ok"):
        return 0
    if first_failed is not None and finished[first_failed]:
        return first_failed
    if results and finished[0]:
        return 0
    for k, done in enumerate(finished):
        if done:
            return k
    return next((k for k, r in enumerate(results) if r is not None), None)  # a snapshot: the runner completes it


def wait_ranks(procs: list[subprocess.Popen], grace_s: float) -> int | None:
    """Wait for every rank; once one fails, the others get `grace_s` and are then killed. Returns the rank that
    failed first (None: none failed)."""
    first_failed: int | None = None
    kill_at: float | None = None
    while True:
        # every rank polled each round: `any(p.poll() is None ...)` would stop at the first live rank and never
        # see that a later one died
        alive = [p.poll() is None for p in procs]
        for r, p in enumerate(procs):
            if first_failed is None and p.returncode not in (None, 0):
                first_failed, kill_at = r, time.monotonic() + grace_s
        if not any(alive):
            break
        if kill_at is not None and time.monotonic() > kill_at:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
        time.sleep(0.05)
    if first_failed is None:
        first_failed = next((r for r, p in enumerate(procs) if p.returncode != 0), None)
    return first_failed


def run(world: int, harness_argv: list[str], grace_s: float = GRACE_S) -> int:
    """Run `world` harness ranks and copy the chosen rank's result to the --out file. Returns 0, or the exit code of the
    first rank to fail (4 when a signal killed it)."""
    out = Path(harness_argv[harness_argv.index("--out") + 1])
    rendezvous = out.parent / f".ranks-{os.getpid()}"
    shutil.rmtree(rendezvous, ignore_errors=True)
    rendezvous.mkdir(parents=True, mode=0o700)   # the rendezvous file in it lets a process join the group
    procs: list[subprocess.Popen] = []
    first_failed: int | None = None
    try:
        procs = [subprocess.Popen(rank_argv(harness_argv, r, rendezvous)) for r in range(world)]
        first_failed = wait_ranks(procs, grace_s)
        results = [_load(rendezvous / f"rank{r}.json") for r in range(world)]
        chosen = choose_result(results, first_failed)
        if chosen is not None:
            tmp = out.with_name(out.name + ".tmp")   # not cuco.atomic: this script runs without PYTHONPATH
            tmp.write_text(json.dumps(results[chosen]))
            os.replace(tmp, out)
    finally:
        for p in procs:  # this launcher interrupted: take the ranks with it
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(rendezvous, ignore_errors=True)
    if first_failed is None:
        return 0
    rc = procs[first_failed].returncode
    return rc if rc and rc > 0 else 4  # killed by a signal: report it as a crash


def main(argv: list[str] | None = None) -> int:
    """The command line of the module docstring; returns the exit status (2 for bad usage)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print("usage: ranks.py --world W [--grace-s S] -- HARNESS_ARGV... --out RESULT.json", file=sys.stderr)
        return 2
    cut = args.index("--")
    ap = argparse.ArgumentParser(prog="ranks.py")
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--grace-s", type=float, default=GRACE_S)
    opts = ap.parse_args(args[:cut])
    if opts.world < 1:
        print("ranks.py: --world must be >= 1", file=sys.stderr)
        return 2
    return run(opts.world, args[cut + 1:], opts.grace_s)


if __name__ == "__main__":
    sys.exit(main())
