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
