"""docs/run_dir.md documents every field summary.json holds, the measured metrics and environment included."""

from __future__ import annotations

import re
from pathlib import Path

from cuco.candidate import Candidate
from cuco.evaluate.cascade import Evaluator
from cuco.run_summary import RunSummary
from cuco.run import ENVIRONMENT_KEYS

DOC = Path(__file__).resolve().parents[1] / "docs" / "run_dir.md"


def _documented() -> set[str]:
    return set(re.findall(r"`([a-z_:<>]+)`", DOC.read_text()))


def test_every_summary_field_is_documented(tmp_path):
    cand = Candidate(code="", workload="w")
    summary = RunSummary("w", tmp_path, "measured", 1, {"passed": 1}, cand, cand, dict.fromkeys(ENVIRONMENT_KEYS))
    data = summary.to_dict()
    fields = set(data) | set(data["best"]) | set(data["environment"])
    assert fields <= _documented(), sorted(fields - _documented())


def test_every_measured_metric_is_documented():
    metrics = Evaluator._metrics(1.0, 2.0, 0.5, 0.8, 0.01)  # every figure the harness can take
    assert set(metrics) <= _documented(), sorted(set(metrics) - _documented())

