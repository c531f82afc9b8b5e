"""RUN_DIR/events.log: messages, stage moves and a logger's records, one timestamped line each."""

from __future__ import annotations

import logging

from cuco.events_log import EventLog


def test_a_loggers_records_are_lines_only_while_the_run_holds_them(tmp_path):
    log = EventLog(tmp_path / "events.log")
    logger = logging.getLogger("cuco.build")
    before = logger.level
    with log.logging_from("cuco.build"):
        logger.info("building x's compute library")
        logger.debug("not a line: below INFO")
    logger.info("after the run: not a line")
    lines = (tmp_path / "events.log").read_text().splitlines()
    assert len(lines) == 1 and lines[0].endswith(" building x's compute library")
    assert logger.level == before and not logger.handlers   # the logger is left as it was found


def test_messages_and_stages_keep_their_order(tmp_path):
    log = EventLog(tmp_path / "events.log")
    seen: list[str] = []
    say = log.messages(seen.append)
    say("cuco: first\nline")
    log.stage("abc", "compile")
    lines = (tmp_path / "events.log").read_text().splitlines()
    assert seen == ["cuco: first\nline"]
    assert [line.split(" ", 1)[1] for line in lines] == ["cuco: first line", "candidate abc compile"]
