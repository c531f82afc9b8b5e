"""The library's messages go to the "cuco" logger (nothing printed); the `cuco` command shows them on stderr."""

from __future__ import annotations

import logging

import pytest

from cuco.cli import _BarSafeHandler, _show_log
from cuco.run_options import RunOptions
from cuco.run import Run


@pytest.fixture
def cuco_logger():
    """The "cuco" logger as the test found it, restored after (the command line changes it)."""
    log = logging.getLogger("cuco")
    saved = (list(log.handlers), log.level, log.propagate)
    log.handlers = [h for h in log.handlers if not isinstance(h, _BarSafeHandler)]  # an earlier command's
    yield log
    log.handlers, log.level, log.propagate = saved


def test_a_run_says_what_it_does_through_the_cuco_logger_not_print(tmp_path, caplog, capsys, cuco_logger):
    with caplog.at_level(logging.INFO, logger="cuco"):
        with Run.open(RunOptions("gemm_allgather", world=2, run_dir=str(tmp_path / "run"), progress=False)):
            pass
    said = [r for r in caplog.records if r.name == "cuco"]
    assert said and "legal points" in said[0].getMessage()
    assert capsys.readouterr().out == ""


def test_the_command_line_shows_the_log_on_stderr_once(cuco_logger, capsys):
    _show_log()
    _show_log()  # a second command in the same process: still one handler
    cuco_logger.info("cuco: shown")
    cuco_logger.debug("cuco: detail")
    assert capsys.readouterr().err.splitlines() == ["cuco: shown"]
