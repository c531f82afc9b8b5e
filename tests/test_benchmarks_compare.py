"""benchmarks/compare.py flags figures more than 5% worse and exits 1; better or equal figures pass."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("bench_compare", ROOT / "benchmarks" / "compare.py")
compare_mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_mod)
COMMITTED = ROOT / "benchmarks" / "results" / "gemm_allgather.json"


def _write(tmp_path: Path, data) -> Path:
    p = tmp_path / "new.json"
    p.write_text(json.dumps(data))
    return p


def test_same_results_pass(tmp_path, capsys):
    assert compare_mod.main([str(COMMITTED), str(COMMITTED)]) == 0
    assert "0 figure(s)" in capsys.readouterr().out


def test_slower_best_and_lower_speedup_fail(tmp_path, capsys):
    data = json.loads(COMMITTED.read_text())
    new = copy.deepcopy(data)
    new["rows"][0]["best_ms"] *= 1.06
    new["rows"][1]["speedup"] *= 0.9
    new["rows"][2]["torch_fused_ms"] *= 2  # an anchor from another library is not our regression
    new["rows"][3]["best_ms"] *= 1.04      # within 5%
    assert compare_mod.main([str(COMMITTED), str(_write(tmp_path, new))]) == 1
    out = capsys.readouterr().out
    assert out.count("WORSE:") == 2 and "best_ms" in out and "speedup" in out and "torch" not in out


def test_lost_verification_and_missing_rows_are_reported():
    old = {"rows": [{"shape": "a", "world": 1, "verified": True, "best_ms": 1.0},
                    {"shape": "b", "world": 1, "best_ms": 1.0}]}
    new = {"rows": [{"shape": "a", "world": 1, "verified": False, "best_ms": 0.5}]}
    worse, notes = compare_mod.compare(old, new)
    assert worse == ["shape=a,world=1: verified was true, now False"]
    assert notes == ["shape=b,world=1: not in the new results"]
    faster = {"rows": [{"shape": "a", "world": 1, "verified": True, "best_ms": 0.5}]}
    assert compare_mod.compare(old, faster)[0] == []
