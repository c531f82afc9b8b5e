"""The report stays right on odd runs: NaN, infinite or text values, a workload name that opens an HTML comment in
the page's data block, a run's state said as it is (ended, running, stopped, a finished Python-API run), one
phrase for how a run evaluated, the driver's release rather than its CUDA version, and a fitness chart that draws
right without the report's CSS (a notebook's display) — the last two in headless Chromium where it is installed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_report import WL, _chromium, _console, _ok, _written_run
from test_search_workload import SHAPE, TOPOLOGY

from cuco import runlock
from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.report import write_report
from cuco.report.charts import fitness_chart
from cuco.search import api
from cuco.search.run_state import PREFIX

ATTRIBUTE_NUMBER = re.compile(r"""(?:x|y|cx|cy|width|height|points|d)=['"]([^'"]*)['"]""")


def _row(page: str, key: str) -> str | None:
    m = re.search(rf"<tr><td>{key}</td><td>([^<]*)</td></tr>", page)
    return m.group(1) if m else None


def _add(run: Path, *cands: Candidate) -> None:
    with CandidateDB(run / "candidates.db") as db:
        for c in cands:
            db.add(c)


def _measured(fitness: float, created_at: float, **metrics: object) -> Candidate:
    return Candidate(code=f"// {created_at}\n", workload="toy_report", mutation="directive", fitness=fitness,
                     results={lv: _ok(lv) for lv in ("static", "compile", "verify", "bench")},
                     metrics=metrics, created_at=created_at)  # type: ignore[arg-type]


def test_nan_and_infinite_fitness_place_no_point(tmp_path):
    run = _written_run(tmp_path)
    _add(run, _measured(float("nan"), 6.0), _measured(float("inf"), 7.0), _measured(float("-inf"), 8.0))
    page = write_report(run).read_text()
    values = ATTRIBUTE_NUMBER.findall(page)
    assert values and not [v for v in values if re.search(r"nan|inf", v, re.I)]
    assert _row(page, "speedup") == "1.6"  # the best is still the finite one


def test_a_non_numeric_metric_and_trace_timestamp_are_shown_not_a_crash(tmp_path):
    run = _written_run(tmp_path)
    _add(run, _measured(1.7, 6.0, time_ms="fast", speedup=1.7))
    trace = json.loads((run / "timeline" / "best.json").read_text())
    trace["traceEvents"].append({"ph": "X", "name": "odd", "cat": "compute", "pid": "rank 0", "tid": "stream 7",
                                 "ts": "soon", "dur": 10})
    (run / "timeline" / "best.json").write_text(json.dumps(trace))
    page = write_report(run).read_text()
    assert _row(page, "time ms") == "fast"
    assert page.count("class='compute'") == 1  # the placeable event is drawn, the other left out


def test_a_workload_name_opening_a_comment_cannot_stop_the_page_script(tmp_path):
    run = _written_run(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, "workload": "w<!--<script>&</script>"}))
    page = write_report(run)
    block = re.search(r"<script type='application/json' id='run-data'>(.*?)</script>", page.read_text(), re.S)
    assert block and not re.search(r"[<>&]", block.group(1))  # nothing in it an HTML parser reads
    assert json.loads(block.group(1))["workload"] == "w<!--<script>&</script>"
    browser = _chromium()
    if browser is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    dom, console = _console(page, browser)
    assert not console and 'data-ready="1"' in dom, console


def test_a_finished_python_api_run_is_not_in_progress_and_a_running_one_is(tmp_path):
    api.start(tmp_path / "run", WL, ModelledEvaluator(WL, SHAPE, 2), topology=TOPOLOGY, seed=3, islands=2).run(6)
    page = write_report(tmp_path / "run").read_text()
    assert _row(page, "run") == "not running (started through the Python API, which writes no summary.json)"
    assert "Partial report" not in page and "in progress" not in page
    with runlock.held(tmp_path / "run"):  # a search writing: it holds the run's lock
        assert _row(write_report(tmp_path / "run").read_text(), "run") == \
            "in progress (a process holds the run&#x27;s lock)"


def test_a_cuco_run_that_stopped_early_says_so_and_one_that_ended_too(tmp_path):
    run = _written_run(tmp_path)
    page = write_report(run).read_text()
    assert _row(page, "run") == "stopped before it ended (cuco run --resume finishes it)"
    assert "Partial report: missing summary.json" in page
    (run / "summary.json").write_text(json.dumps({"evaluation": "measured"}))
    page = write_report(run).read_text()
    assert _row(page, "run") == "ended" and "Partial report" not in page


def test_a_cpu_cuco_run_reads_one_evaluation_not_two_that_disagree(tmp_path):
    run = _written_run(tmp_path)
    with CandidateDB(run / "candidates.db") as db:
        db.meta_set(PREFIX + "evaluator_kind", "measured")  # the GPU cascade's evaluator ...
    (run / "summary.json").write_text(json.dumps({"evaluation": "unmeasured"}))  # ... on a machine without GPUs
    page = write_report(run).read_text()
    assert _row(page, "evaluator") is None
    assert _row(page, "evaluation") == ("not measured: no GPU where it ran, so candidates were statically checked "
                                        "and compiled only")


def test_the_driver_row_is_the_driver_release_not_the_cuda_version_it_supports(tmp_path):
    run = _written_run(tmp_path)
    env = {"driver_version": "13.0", "cuda_runtime_version": "13.0"}
    (run / "summary.json").write_text(json.dumps({"evaluation": "measured", "environment": env}))
    assert _row(write_report(run).read_text(), "driver") == "supports CUDA 13.0"  # all an older run recorded
    env["driver_release"] = "580.95.05"
    (run / "summary.json").write_text(json.dumps({"evaluation": "measured", "environment": env}))
    assert _row(write_report(run).read_text(), "driver") == "580.95.05"


def test_the_fitness_chart_draws_without_the_reports_css(tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    cands = [_measured(1.0 + i / 10, float(i)) for i in range(6)]
    probe = ("<script>document.body.dataset.fills = Array.from(document.querySelectorAll('svg rect, svg text'))"
             ".map(function (e) { return e.getAttribute('class') + '=' + getComputedStyle(e).fill; }).join(';');"
             "</script>")
    page = tmp_path / "bare.html"  # as a notebook shows it: the fragment alone, no stylesheet
    page.write_text(f"<!DOCTYPE html><html><body>{fitness_chart(cands, ['explore'] * 3 + ['exploit'] * 3)}"
                    f"{probe}</body></html>")
    dom, console = _console(page, browser)
    fills = dict(f.split("=", 1) for f in re.search(r'data-fills="([^"]*)"', dom).group(1).split(";"))
    assert not console, console
    assert fills["explore"] == "rgb(232, 238, 252)" and fills["axis"] == "rgb(85, 85, 85)", fills
    assert fills["null"] == "rgb(250, 250, 250)", fills  # the background
