"""The LLM spend of a run, kept on disk so a USD cap holds across processes and resumes.

An append-only JSON-lines file: a `reserve` record (the call's worst case) before every provider call and a
`settle` record (its cost) after. Loading counts settled costs, and every reservation never settled (the
process was killed with the call in flight, which may still be billed) at its worst case.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path

from cuco.errors import CucoError

LEDGER_FILE = "llm_spend.jsonl"


class SpendLedger:
    """Append-only record of reservations and settlements; thread-safe within a process."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()

    def total_usd(self) -> float:
        """Settled costs plus the worst case of every reservation left unsettled."""
        reserved: dict[str, float] = {}
        settled = 0.0
        if not self.path.exists():
            return 0.0
        with self.path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    op, rid, usd = rec["op"], rec["id"], float(rec["usd"])
                except (ValueError, KeyError, TypeError):
                    if line.endswith("\n"):
                        raise CucoError(f"{self.path} line {n} is not a spend record; the run's LLM spend cannot "
                                        "be known: restore the file or start a new run") from None
                    continue  # a last line cut by a kill mid-write: its call was never made
                if op == "reserve":
                    reserved[rid] = usd
                elif op == "settle":
                    reserved.pop(rid, None)
                    settled += usd
        return settled + sum(reserved.values())

    def reserve(self, usd: float, model: str) -> str:
        """Record a reservation of `usd` (the worst case) for a call to `model`; returns its id for `settle`."""
        rid = uuid.uuid4().hex
        self._append({"op": "reserve", "id": rid, "usd": usd, "model": model})
        return rid

    def settle(self, rid: str, usd: float, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        """Record the actual cost of reservation `rid`, which replaces its worst case."""
        self._append({"op": "settle", "id": rid, "usd": usd, "prompt_tokens": prompt_tokens,
                      "completion_tokens": completion_tokens})

    def _append(self, record: dict) -> None:
        line = (json.dumps(record) + "\n").encode()
        with self._lock:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _cut_torn_tail(fd)
                os.write(fd, line)   # one write of a short line: appends do not interleave
                os.fsync(fd)
            finally:
                os.close(fd)


def _cut_torn_tail(fd: int) -> None:
    """Remove a last line cut by a kill mid-write (its call was never made). Appended to, it would become a
    whole line that is not a record, and every later load would refuse the ledger."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - 65536)   # records are short: the last newline is near the end
    tail = os.pread(fd, size - start, start)
    cut = tail.rfind(b"\n")
    if cut < 0 and start > 0:
        raise CucoError("the LLM spend ledger ends in 64 KiB without a line break; it is not a cuco ledger: "
                        "restore the file or start a new run")
    os.ftruncate(fd, start + cut + 1)
