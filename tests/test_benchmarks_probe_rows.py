"""benchmarks/probe_rows.py: a probe's rows printed as they come and written once at the end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import probe_rows  # noqa: E402


def test_rows_are_printed_as_measured_and_written_at_the_end(tmp_path, capsys):
    out = tmp_path / "rows.json"
    seen = []

    def rows():
        for i in range(3):
            seen.append(capsys.readouterr().out.count("\n"))  # rows printed before this one was measured
            yield {"i": i}

    assert probe_rows.collect(rows(), str(out)) == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert seen == [0, 1, 1]  # each earlier row was printed before the next was drawn (readouterr drains)
    assert json.loads(out.read_text()) == {"rows": [{"i": 0}, {"i": 1}, {"i": 2}]}


def test_no_file_is_written_without_a_path(tmp_path, capsys):
    assert probe_rows.collect(iter([{"a": 1}]), None) == [{"a": 1}]
    assert json.loads(capsys.readouterr().out) == {"a": 1}
    assert not list(tmp_path.iterdir())
