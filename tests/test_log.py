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


def test_unit_first_points_are_evaluated_once_in_one_batch_within_the_runs_evaluations(tmp_path):
    """`--try` points: rendered on the run's topology, stored, evaluated together, never twice (a resumed run holds
    them), and no more than the run's evaluations allow."""
    first = ("lsa/fused/world/copy_engine/4MiB", "lsa/deferred/world/cta/whole", "lsa/stream_overlap/world/cta/whole")
    batches = []

    class RecordingEvaluator:  # unit-test double of the run's evaluator: records each batch, evaluates nothing
        def evaluate(self, cands):
            batches.append([c.directives.label() for c in cands])
            return cands

    opts = RunOptions("gemm_allgather", world=2, run_dir=str(tmp_path / "run"), progress=False, evaluations=2,
                      first_points=first)
    with Run.open(opts) as run:
        run.evaluator = RecordingEvaluator()
        tried = run.try_first()
        assert run.try_first() == []
        stored = {c.directives.label(): c for c in run.db.all("gemm_allgather") if c.directives is not None}
    assert batches == [list(first[:2])]
    assert [c.mutation for c in tried] == ["manual", "manual"] and set(stored) == set(first[:2])
    assert "design point lsa/fused/world/copy_engine/4MiB" in stored[first[0]].code  # rendered for this point
