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


def test_stage_seconds_count_overlapping_candidates_once(tmp_path):
    from cuco.events_log import stage_seconds

    lines = ["2026-11-26T10:00:00.000+00:00 cuco: start",
             "2026-11-26T10:00:10.000+00:00 candidate a compile",
             "2026-11-26T10:00:12.000+00:00 candidate b compile",
             "2026-11-26T10:00:20.000+00:00 candidate a verify",
             "2026-11-26T10:00:22.000+00:00 candidate b verify",
             "2026-11-26T10:00:25.000+00:00 candidate a done",
             "2026-11-26T10:00:30.000+00:00 candidate b done",
             "2026-11-26T10:00:40.000+00:00 cuco: summary"]
    (tmp_path / "events.log").write_text("\n".join(lines) + "\n")
    s = stage_seconds(tmp_path / "events.log")
    assert s == {"compile": 12.0, "verify": 10.0, "total": 40.0, "outside": 20.0}
