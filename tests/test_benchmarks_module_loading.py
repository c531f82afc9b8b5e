"""benchmarks/module_loading.py: the per-mode medians it reports."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from module_loading import summarise  # noqa: E402


def test_each_mode_gets_the_median_of_its_own_runs_and_none_where_no_run_had_a_figure() -> None:
    samples = {"EAGER": [{"wall_s": 9.0, "region_ms": 0.02, "cold_ms": None},
                         {"wall_s": 7.0, "region_ms": 0.04, "cold_ms": None},
                         {"wall_s": 8.0, "region_ms": 0.03, "cold_ms": None}],
               "LAZY": [{"wall_s": 1.0, "region_ms": 0.03, "cold_ms": 5.0},
                        {"wall_s": 2.0, "region_ms": 0.05, "cold_ms": 3.0}]}
    got = summarise(samples)
    assert got["EAGER"] == {"wall_s": 8.0, "region_ms": 0.03, "cold_ms": None}
    assert got["LAZY"] == {"wall_s": 1.5, "region_ms": 0.04, "cold_ms": 4.0}


def test_the_record_carries_each_modes_spread_the_widest_and_the_device() -> None:
    from module_loading import record

    samples = {"EAGER": [{"wall_s": 4.0, "region_ms": 0.02, "cold_ms": 0.1},
                         {"wall_s": 5.0, "region_ms": 0.02, "cold_ms": 0.1}],
               "LAZY": [{"wall_s": 2.0, "region_ms": 0.02, "cold_ms": 0.2}]}
    got = record("p", 2, "NVIDIA H100 80GB HBM3 x2", "2026-11-28", samples)
    assert got["spread_by_mode"]["EAGER"] == {"wall_s": 1.0 / 4.5, "region_ms": 0.0, "cold_ms": 0.0}
    assert got["spread_by_mode"]["LAZY"] == {"wall_s": None, "region_ms": None, "cold_ms": None}  # one run
    assert got["spread"] == 1.0 / 4.5 and got["device"] == "NVIDIA H100 80GB HBM3 x2" and got["runs"] == 1
