"""The run's event log, RUN_DIR/events.log: every message of the run and every candidate's move from stage to
stage, one line each with its UTC time, so where a run's time went can be read after it ended or was cut off."""

from __future__ import annotations

import contextlib
import datetime
import logging
import threading
from pathlib import Path
from typing import Callable, Iterator

from cuco.evaluate.base import StageFn

FILE = "events.log"


class EventLog:
    """Appends timestamped lines to `path` (thread-safe: evaluators report stages from worker threads)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        """One line: the UTC time to the millisecond, then `text` (newlines folded)."""
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
        line = f"{now} {' '.join(text.split())}\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)

    def messages(self, forward: Callable[[str], None]) -> Callable[[str], None]:
        """An on_event callback that logs each message, then hands it to `forward`."""
        def on_event(text: str) -> None:
            self.write(text)
            forward(text)
        return on_event

    @contextlib.contextmanager
    def logging_from(self, name: str) -> Iterator[None]:
        """While open, the records of logger `name` (INFO and up) are also lines of this log."""
        handler, logger = _Lines(self), logging.getLogger(name)
        level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:   # INFO records reach the handlers while the run is open
            logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(level)

    def stage(self, candidate_id: str, stage: str) -> None:
        """An evaluator's on_stage hook: `candidate_id` entered `stage`."""
        self.write(f"candidate {candidate_id} {stage}")


class _Lines(logging.Handler):
    """A logging handler writing each record's message as a line of an EventLog."""

    def __init__(self, log: EventLog):
        super().__init__(logging.INFO)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.log.write(record.getMessage())
        except Exception:  # a logging handler must never raise into the run
            self.handleError(record)


def chain(first: StageFn | None, second: StageFn) -> StageFn:
    """A stage hook calling `first` (if any), then `second`."""
    if first is None:
        return second

    def both(candidate_id: str, stage: str) -> None:
        first(candidate_id, stage)
        second(candidate_id, stage)
    return both


def stage_seconds(path: Path) -> dict[str, float]:
    """Where a run's wall time went, from its events.log: for each stage (compile, verify, bench) the seconds in
    which at least one candidate was in it; `outside` the seconds with no candidate in any stage (fast path,
    library builds, search); `total` first line to last. Candidates overlap, so stages may sum past `total`."""
    moves: dict[str, list[tuple[float, str]]] = {}
    first = last = None
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        stamp, _, text = line.partition(" ")
        try:
            t = datetime.datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            continue
        first, last = first if first is not None else t, t
        words = text.split()
        if len(words) == 3 and words[0] == "candidate":
            moves.setdefault(words[1], []).append((t, words[2]))
    spans: dict[str, list[tuple[float, float]]] = {}
    for steps in moves.values():
        for (t0, stage), (t1, _next) in zip(steps, steps[1:]):
            spans.setdefault(stage, []).append((t0, t1))
    out = {stage: _covered(s) for stage, s in spans.items() if stage != "done"}
    out["total"] = (last - first) if first is not None and last is not None else 0.0
    out["outside"] = out["total"] - _covered([s for stage, ss in spans.items() if stage != "done" for s in ss])
    return {k: round(v, 3) for k, v in out.items()}


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of the (start, end) spans."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total
