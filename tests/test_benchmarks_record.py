"""The figures-of-record arithmetic of benchmarks/record.py: medians over repeats, the spread that decides a
re-run, and the derived speedup, bound and overlap efficiency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import record  # noqa: E402


def test_derived_figures_follow_the_bound_definition():
    d = record.derived({"host_ms": 2.0, "best_ms": 1.2, "compute_ms": 1.0, "comm_ms": 0.5})
    assert d["bound_ms"] == 1.0 and d["speedup"] == pytest.approx(2.0 / 1.2)
    assert d["overlap_efficiency"] == pytest.approx((2.0 - 1.2) / (2.0 - 1.0))
    assert record.derived({"host_ms": 1.0, "best_ms": 1.0, "compute_ms": 1.0, "comm_ms": 0.2})["overlap_efficiency"] is None
    assert record.derived({"host_ms": None, "best_ms": 1.0})["speedup"] is None


def test_a_figure_names_the_commit_it_was_measured_at(monkeypatch):
    monkeypatch.setenv("CUCO_COMMIT", "abc1234")
    assert record.source_commit() == "abc1234"  # the caller's word: the GPU machine's .git may be older
    monkeypatch.delenv("CUCO_COMMIT")
    here = record.source_commit()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        assert here == "unknown"
    else:
        assert here.removesuffix("+local changes") == head.stdout.strip()


def test_spread_is_the_widest_figure_and_medians_skip_missing_values():
    runs = [{"host_ms": 1.0, "best_ms": 0.50}, {"host_ms": 1.02, "best_ms": 0.56}, {"host_ms": 1.01, "best_ms": None}]
    spread, by = record._spread(runs)
    assert by["host_ms"] == pytest.approx(0.02 / 1.01) and by["best_ms"] == pytest.approx(0.06 / 0.53)
    assert spread == by["best_ms"] > record.SPREAD_LIMIT
    assert record._median(runs, "best_ms") == pytest.approx(0.53) and record._median(runs, "comm_ms") is None


def test_a_figure_below_the_resolution_is_reported_but_does_not_hold_the_repeats():
    runs = [{"host_ms": 0.700, "comm_ms": 0.002}, {"host_ms": 0.705, "comm_ms": 0.003}, {"host_ms": 0.702,
                                                                                        "comm_ms": 0.0025}]
    spread, by = record._spread(runs)
    assert by["comm_ms"] == pytest.approx(0.001 / 0.0025)  # listed, with its own spread (0.4)
    assert spread == pytest.approx(0.005 / 0.702) and spread <= record.SPREAD_LIMIT  # the host's: the widest counted
    wide = [dict(r, comm_ms=r["comm_ms"] * 10) for r in runs]  # 20-30 µs: measured, and counted
    assert record._spread(wide)[0] == pytest.approx(0.4)


def test_results_lines_carry_repeats_spread_and_search_costs():
    meta = {"rows": [{"shape": "s1", "repeats": 4, "spread": 0.021, "verified_full_entropy": True, "host_ms_q": 1.5,
                      "best_ms_q": 1.1, "search_wall_s": 60.0, "compile_s": 20.0, "seconds_per_evaluation": 5.0,
                      "device": "H100", "date": "2026-11-26T22:31:05+00:00", "commit": "9059f93"},
                     {"shape": "s2", "device": "H100", "date": "2026-11-26T14:01:00+00:00", "superseded": "old S",
                      "first_points": ["lsa/a/b", "lsa/c/d"]},
                     {"shape": "s3", "device": "H100", "date": "2026-11-26T14:02:00+00:00",
                      "record_error": "RuntimeError: repeat 2 in the order fastpath, best, host failed: host: hang"}],
            "machine": {"p2p": {"one_peer_median_gbps": 375.3, "ring_all_at_once_gbps_per_rank": 327.7,
                                "all_pairs_at_once_gbps_per_rank_in": 225.3}}}
    text = "\n".join(record.record_lines(meta))
    assert ("| s1 | H100, 2026-11-26T22:31, commit 9059f93 | 4 | 0.021 | True | 1.500 | 1.100 | 60.0 | 20.0 | 5.00 |"
            in text)
    assert "| s3 | H100, 2026-11-26T14:02, commit ? — not re-timed, search figures only: RuntimeError: repeat 2" in text
    assert "search began with `lsa/a/b`, `lsa/c/d`" in text and "began with" not in text.split("| s2 |")[0]
    assert "superseded: old S" in text and "2 device calls (hours 2026-11-26T14, 2026-11-26T22" in text
    assert "375 GB/s one peer at a time" in text and "full-entropy" in text


def test_sanitizer_logs_separate_device_hazards_from_api_error_returns():
    import sanitize

    log = ("========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to \"no kernel image\" on CUDA API call"
           " to cudaFuncGetAttributes.\n========= Invalid __global__ read of size 4 bytes\n"
           "========= ERROR SUMMARY: 2 errors\n")
    assert sanitize.classify(log) == {"errors": 2, "device_hazards": 1, "api_errors": 1}
    assert sanitize.classify("========= ERROR SUMMARY: 0 errors\n") == {"errors": 0, "device_hazards": 0,
                                                                        "api_errors": 0}
    assert sanitize.classify("timed out")["errors"] is None


def test_search_costs_count_harness_seconds_per_evaluation_not_parallel_compiles(tmp_path):
    from cuco.candidate import Candidate, LevelResult
    from cuco.db import CandidateDB

    db = CandidateDB(tmp_path / "candidates.db")
    for i in range(4):  # four candidates compiled in parallel: 10 s of nvcc each, 2 s in the harness each
        c = Candidate(code=f"// {i}", workload="w", mutation="manual")
        for level, secs in (("compile", 10.0), ("verify", 0.5), ("bench", 1.5)):
            c = c.with_result(LevelResult(level, True, seconds=secs))
        db.add(c)
    db.close()
    costs = record.search_costs(tmp_path, "w", wall_s=15.0)
    assert costs == {"compile_s": 40.0, "harness_s": 8.0, "seconds_per_evaluation": 2.0}


def test_repeats_alternate_order_stop_when_steady_and_a_hang_ends_the_retiming():
    seen = []

    def steady(order, verify):
        seen.append((tuple(order), verify))
        return {"host_ms": 1.0, "best_ms": 0.5, "failures": {}}

    runs = record.repeat_until_steady(steady, ["host", "best"], 3, 7, "wl s")
    assert len(runs) == 3
    assert seen == [(("host", "best"), True), (("best", "host"), False), (("host", "best"), False)]

    times = iter([0.5, 0.6, 0.5, 0.6, 0.5, 0.6, 0.5, 0.6])
    noisy = record.repeat_until_steady(lambda o, v: {"best_ms": next(times), "failures": {}}, ["best"], 3, 5, "wl s")
    assert len(noisy) == 5  # the spread never settles: stops at max_repeats

    def hangs_second(order, verify):
        return {"best_ms": 0.5, "failures": {} if verify else {"best": "hang in phase bench: watchdog"}}

    with pytest.raises(RuntimeError, match=r"repeat 2 in the order best, host failed: best: hang in phase bench"):
        record.repeat_until_steady(hangs_second, ["host", "best"], 3, 7, "wl s")


@pytest.mark.parametrize("chosen", ["host", "fastpath", "lsa/deferred/world/cta/whole"])
def test_the_selections_choice_is_re_timed_and_a_seed_or_fast_path_is_not_timed_twice(monkeypatch, chosen):
    """The finalists (the search's best points and the fast path) and the host are timed together first; the fastest
    is the row's best, whatever the search ranked first. Chosen host seed or fast path: not re-timed as a second
    program, its figure of record is its own from the same repeats (the host's: speedup exactly 1.0); a chosen
    point is re-timed beside the host."""
    import types

    import search_rows

    from cuco.design_space import Directives

    timed: dict[str, str] = {}
    offered: dict[str, str] = {}

    def retime_stand_in(workload, name, world, codes, repeats=3, iters=30):   # stands in for the GPU re-timing
        timed.update(codes)
        out = {"host_ms": 2.0, "fastpath_ms": 1.9, "compute_ms": 1.0, "comm_ms": 0.5, "verified_full_entropy": True,
               "host_ms_q": 1.8, "fastpath_ms_q": 1.7, "compute_ms_q": 0.9, "comm_ms_q": 0.4,
               "per_repeat": [{"host_ms": 2.0 + i, "fastpath_ms": 1.9 + i, "compute_ms": 1.0, "comm_ms": 0.5}
                              for i in range(repeats)]}
        if "best" in codes:
            out.update(best_ms=1.6, best_ms_q=1.5)
            for r in out["per_repeat"]:
                r["best_ms"] = 1.6
        return out

    def select_stand_in(workload, name, world, codes, repeats=3, iters=30):   # stands in for the GPU selection
        offered.update(codes)
        return {"chosen": chosen, "medians_ms": {}, "repeats": repeats}

    points = ["lsa/deferred/world/cta/whole", "lsa/stream_overlap/team/copy_engine/whole"]
    stored = [types.SimpleNamespace(id=f"c{i}", status="passed", fitness=1.1 + i, mutation="directive",
                                    directives=Directives.from_label(p), code=f"code of {p}")
              for i, p in enumerate(points)]
    monkeypatch.setattr(record, "retime", retime_stand_in)
    monkeypatch.setattr(record, "select_fastest", select_stand_in)
    monkeypatch.setattr(search_rows, "stored_candidates", lambda run_dir, workload: stored)
    best = stored[1]
    fast = types.SimpleNamespace(status="passed", code="fast path code", mutation="fastpath", directives=None)
    summary = types.SimpleNamespace(best=best, fastpath=fast, run_dir=Path("/nonexistent"))
    best.metrics = {"time_ms": 1.7, "host_ms": 2.0, "speedup": 2.0 / 1.7}
    row = search_rows.of_record("gemm_allgather", "s", 2, summary, repeats=5)
    assert offered == {points[1]: f"code of {points[1]}", points[0]: f"code of {points[0]}",
                       "fastpath": "fast path code"}
    assert timed["fastpath"] == "fast path code" and row["verified"]
    assert row["search_best_point"] == points[1] and row["selection"]["chosen"] == chosen
    if chosen == "host":
        assert "best" not in timed and row["best_point"] == "original"
        assert row["best_ms"] == row["host_ms"] == 2.0 and row["speedup"] == 1.0 and row["speedup_q"] == 1.0
        assert row["overlap_efficiency"] == 0.0 and row["best_ms_q"] == 1.8
        assert [r["best_ms"] for r in row["per_repeat"]] == [2.0, 3.0, 4.0, 5.0, 6.0]  # each repeat's own host
    elif chosen == "fastpath":
        assert "best" not in timed and row["best_point"] == "fastpath"
        assert row["best_ms"] == 1.9 and row["best_ms_q"] == 1.7 and row["speedup"] == pytest.approx(2.0 / 1.9)
        assert [r["best_ms"] for r in row["per_repeat"]] == [1.9, 2.9, 3.9, 4.9, 5.9]
    else:
        assert timed["best"] == f"code of {chosen}" and row["best_ms"] == 1.6 and row["best_point"] == chosen


def test_the_fastest_label_is_the_smallest_median_and_an_untimed_one_loses():
    runs = [{"host_ms": 1.00, "a_ms": 0.90, "b_ms": 0.95, "c_ms": None},
            {"host_ms": 1.02, "a_ms": 0.99, "b_ms": 0.93, "c_ms": None},
            {"host_ms": 0.98, "a_ms": 0.97, "b_ms": 0.94, "c_ms": None}]
    winner, medians = record.fastest(runs, ["host", "a", "b", "c"])
    assert winner == "b" and medians["a"] == pytest.approx(0.97) and medians["c"] is None
    with pytest.raises(RuntimeError, match="no finalist"):
        record.fastest(runs, ["c"])


def test_paired_difference_is_the_mean_with_students_half_width():
    reps = [{"best_ms": 10.3, "compute_ms": 10.0}, {"best_ms": 10.5, "compute_ms": 10.1},
            {"best_ms": 9.9, "compute_ms": 9.8}, {"best_ms": 10.0, "compute_ms": None}]  # the last is not a pair
    mean, half = record.paired_difference(reps, "best_ms", "compute_ms")
    d = [0.3, 0.4, 0.1]
    sd = (sum((x - sum(d) / 3) ** 2 for x in d) / 2) ** 0.5
    assert mean == pytest.approx(sum(d) / 3) and half == pytest.approx(4.303 * sd / 3 ** 0.5)
    assert record.paired_difference(reps[:1], "best_ms", "compute_ms") is None  # one pair: no interval


@settings(deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 2.0), st.floats(-50.0, 50.0)), min_size=2, max_size=40))
def test_paired_difference_ignores_drift_common_to_both_figures(pairs):
    """Each repeat is one harness process: a clock or power drift moves both of its figures, and cancels."""
    base = [{"a": 100.0 + x, "b": 100.0} for x, _ in pairs]
    drifted = [{"a": r["a"] + c, "b": r["b"] + c} for r, (_, c) in zip(base, pairs)]
    m0, h0 = record.paired_difference(base, "a", "b")
    m1, h1 = record.paired_difference(drifted, "a", "b")
    assert m1 == pytest.approx(m0, abs=1e-9) and h1 == pytest.approx(h0, abs=1e-6)
    assert h0 >= 0.0
