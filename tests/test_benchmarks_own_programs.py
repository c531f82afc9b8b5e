"""benchmarks/own_programs.py: which corpus programs a device call runs, and rows read from either file shape."""

from __future__ import annotations

import json

import pytest

from bench_scripts import bench_module

own = bench_module("own_programs")
CORPUS = list(json.loads((own.CORPUS / "manifest.json").read_text())["programs"])


def test_pending_is_the_corpus_less_the_programs_with_a_row(tmp_path):
    done = tmp_path / "own_programs_w2.json"
    done.write_text(json.dumps({"world": 2, "rows": [{"program": CORPUS[0]},
                                                     {"program": CORPUS[1], "error": "RuntimeError: cut off"}]}))
    # a row that ended in an error is run again; the order is the manifest's
    assert own.programs("pending", str(done)) == CORPUS[1:]
    assert own.programs("pending", None) == CORPUS
    assert own.programs(f"{CORPUS[2]},{CORPUS[0]}", str(done)) == [CORPUS[2]]


def test_an_unknown_program_is_refused_naming_the_corpus():
    with pytest.raises(SystemExit, match=f"not in the corpus: no_such_program .*{CORPUS[0]}"):
        own.programs("no_such_program", None)


def test_rows_come_from_a_row_list_or_a_results_file():
    rows = [{"program": "a"}]
    assert own._rows(rows) == rows and own._rows({"world": 2, "rows": rows}) == rows


def test_shards_split_the_pending_list_without_overlap_or_loss(tmp_path):
    shards = [own.programs("pending", None, f"{i}/3") for i in range(3)]
    assert sorted(n for s in shards for n in s) == sorted(CORPUS)
    assert all(set(a).isdisjoint(b) for k, a in enumerate(shards) for b in shards[k + 1:])
    with pytest.raises(SystemExit, match="0 <= i < n"):
        own.programs("pending", None, "2/2")


def test_the_table_says_which_rows_hold_figures_of_record():
    base = {"collectives": ["ncclAllReduce"], "launch_model": "thread-per-gpu", "evaluated": 8, "fastpath_ms": 0.05,
            "host_ms": 0.03, "best_ms": 0.03, "speedup": 1.0, "cold_ms": 0.2, "cold_best_ms": 0.2, "verified": True}
    rows = [{**base, "program": "a", "best_point": "original", "record_repeats": 5, "spread": 0.021},
            {**base, "program": "b", "best_point": "original", "spread": 0.147},
            {"program": "c", "collectives": [], "launch_model": "?", "error": "ProgramError: no"}]
    table = own.render(rows).splitlines()
    header = next(ln for ln in table if ln.startswith("| program"))
    a, b, c = (next(ln for ln in table if ln.startswith(f"| {n} ")) for n in "abc")
    assert all(ln.count("|") == header.count("|") for ln in (a, b, c))
    assert "| 5 | 0.0210 |" in a and "| - | 0.1470 |" in b
