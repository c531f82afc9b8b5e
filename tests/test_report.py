"""The HTML report of a run: what it shows (from a real small search run and from a run directory written with
every kind of candidate), that it escapes what candidates and providers wrote, that it reads a run while it is
being written, clear errors for what is not a run, and a headless-Chromium check that the page runs without
console errors (Debian's `chromium`; .ci/run installs it)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_search_workload import SHAPE, TOPOLOGY, make_workload

from cuco.candidate import Candidate, LevelResult
from cuco.db import CandidateDB
from cuco.design_space import Directives
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.report import ReportError, load_run, write_report
from cuco.search import api
from cuco.spend import SpendLedger

WL = make_workload("toy_report")


def _ok(level: str) -> LevelResult:
    return LevelResult(level, True, "", 0.1)


def _written_run(root: Path, reason: str = "nvcc: error: identifier 'x' is undefined") -> Path:
    """A run directory with a seed, a fast-path candidate, a passed child, failures at two levels, LLM spend and
    a trace, written through the real database and ledger."""
    run = root / "run"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"workload": "toy_report", "shape": "8192x8192x8192", "world": 2,
                                                   "device": "NVIDIA H200", "cuco_version": "0.1.0"}))
    seed = Candidate(code="int main() { return 0; }\n", workload="toy_report", mutation="seed",
                     directives=Directives.from_label("lsa/deferred/world/cta/whole"),
                     results={lv: _ok(lv) for lv in ("static", "compile", "verify", "bench")},
                     metrics={"time_ms": 2.0, "host_ms": 2.0, "speedup": 1.0}, fitness=1.0, created_at=1.0)
    fast = Candidate(code="// fast path\nint main() { return 1; }\n", workload="toy_report", mutation="fastpath",
                     results={lv: _ok(lv) for lv in ("static", "compile", "verify", "bench")},
                     metrics={"time_ms": 1.8, "speedup": 1.11}, fitness=1.11, created_at=2.0, island=1)
    best = Candidate(code="int main() { return 0; }\n// overlap the pull with the GEMM\n", workload="toy_report",
                     mutation="llm_diff", parent_id=seed.id,
                     directives=Directives.from_label("lsa/stream_overlap/signal/warp/4MiB"),
                     results={lv: _ok(lv) for lv in ("static", "compile", "verify", "bench")},
                     metrics={"time_ms": 1.25, "host_ms": 2.0, "speedup": 1.6, "overlap_efficiency": 0.93},
                     fitness=1.6, created_at=3.0)
    broken = Candidate(code="x", workload="toy_report", mutation="directive", parent_id=seed.id,
                       directives=Directives.from_label("lsa/fused/signal/cta/1MiB"),
                       results={"static": _ok("static"), "compile": LevelResult("compile", False, reason)},
                       created_at=4.0)
    wrong = Candidate(code="y", workload="toy_report", mutation="directive", parent_id=best.id,
                      directives=Directives.from_label("lsa/split_put_wait/world/cta/whole"),
                      results={"static": _ok("static"), "compile": _ok("compile"),
                               "verify": LevelResult("verify", False, "seed 1: 12 of 4096 elements wrong")},
                      created_at=5.0)
    with CandidateDB(run / "candidates.db") as db:
        for c in (seed, fast, best, broken, wrong):
            db.add(c)
    ledger = SpendLedger(run / "llm_spend.jsonl")
    rid = ledger.reserve(0.05, "openai/gpt-x")
    ledger.settle(rid, 0.0123, 1500, 400)
    ledger.reserve(0.05, "openai/gpt-x")  # still in flight
    (run / "timeline").mkdir()
    (run / "timeline" / "best.json").write_text(json.dumps({"traceEvents": [
        {"ph": "X", "name": "gemm", "cat": "compute", "pid": "rank 0", "tid": "stream 7", "ts": 0, "dur": 900},
        {"ph": "X", "name": "pull_kernel", "cat": "communication", "pid": "rank 0", "tid": "stream 9", "ts": 50,
         "dur": 300}]}))
    return run


def test_the_report_shows_best_diffs_grid_failures_llm_and_timeline(tmp_path):
    run = _written_run(tmp_path)
    page = write_report(run).read_text()
    assert "lsa/stream_overlap/signal/warp/4MiB" in page and "0.93" in page  # best point, overlap efficiency
    assert "Against its parent" in page and "overlap the pull with the GEMM" in page
    assert "Against the fast-path candidate" in page
    assert "identifier &#x27;x&#x27; is undefined" in page and "12 of 4096 elements wrong" in page
    assert "compile: 1" in page and "verify: 1" in page
    assert ">2<" in page and ">1500<" in page and ">400<" in page and "0.0123" in page  # calls, tokens, cost
    assert "calls in flight or abandoned</td><td>1<" in page
    assert "<td class='ok'" in page and "<td class='fail'" in page  # the grid
    assert page.count("class='compute'") == 1 and page.count("class='comm'") == 1  # timeline lanes
    assert "href='timeline/best.json'" in page
    assert "NVIDIA H200" in page
    assert not re.search(r"(src|href)=['\"]https?://", page)  # offline: nothing fetched


def test_a_real_small_search_run_is_reported_with_phases_and_islands(tmp_path):
    """A real (modelled, CPU) search run: the chart has one line per island and the explore band."""
    ev = ModelledEvaluator(WL, SHAPE, 2)
    api.start(tmp_path / "run", WL, ev, topology=TOPOLOGY, seed=3, islands=2).run(16)
    data = load_run(tmp_path / "run")
    assert len(data.candidates) == 16 and set(data.phases()) <= {"explore", "exploit"}
    page = write_report(tmp_path / "run").read_text()
    assert page.count("<polyline") == len({c.island for c in data.candidates if c.fitness is not None})
    assert "modelled (a CPU cost model" in page
    assert "started through the Python API, which writes no summary.json" in page  # said, not called partial


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=80))
def test_whatever_a_candidate_or_compiler_wrote_is_escaped(tmp_path_factory, text):
    run = _written_run(tmp_path_factory.mktemp("r"), reason=f"<script>alert(1)</script>{text}</pre>")
    page = write_report(run).read_text()
    assert "<script>alert(1)" not in page
    assert page.count("<script") == 2  # the data block and the page's own script, nothing injected


def test_partial_and_bad_run_directories(tmp_path):
    with pytest.raises(ReportError, match="not a directory"):
        load_run(tmp_path / "nowhere")
    with pytest.raises(ReportError, match="no candidates.db"):
        load_run(tmp_path)
    empty = tmp_path / "empty"
    CandidateDB(empty / "candidates.db").close()
    page = write_report(empty).read_text()
    assert "the run has evaluated nothing yet" in page and "manifest.json" in page
    newer = tmp_path / "newer"
    with CandidateDB(newer / "candidates.db"):
        pass
    conn = sqlite3.connect(newer / "candidates.db")
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(ReportError, match="upgrade cuco"):
        load_run(newer)
    (tmp_path / "half").mkdir()
    half = _written_run(tmp_path / "half")
    (half / "summary.json").write_text('{"workload": "toy_re')  # being written
    assert "summary.json is unreadable or half-written" in write_report(half).read_text()


def test_a_run_being_written_is_read_without_blocking_it(tmp_path):
    run = _written_run(tmp_path)
    with CandidateDB(run / "candidates.db") as writer:  # the run's own connection stays open and writing
        first = load_run(run)
        writer.add(Candidate(code="z", workload="toy_report", mutation="directive", created_at=9.0))
        assert len(load_run(run).candidates) == len(first.candidates) + 1
        write_report(run)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _console(path: Path, browser: str) -> tuple[str, list[str]]:
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True,
                          timeout=120)
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def test_the_page_runs_in_a_headless_browser_without_console_errors(tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("needs Debian's chromium (apt-get install chromium); .ci/run installs it")
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    assert _console(bad, browser)[1], "the console check must see a page's errors"
    page = write_report(_written_run(tmp_path))
    dom, console = _console(page, browser)
    assert not console, console
    assert 'data-ready="1"' in dom and "report of 6 candidates" not in dom and "report of 5 candidates" in dom
