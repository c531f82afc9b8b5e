"""The GPU suite's log at one world size (benchmarks/suite_log.py), gathered from per-file logs: every GPU test file
named with its summary, and the suite passed only when every file passed at one commit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import suite_log  # noqa: E402

FILES = [ROOT / "tests" / "test_workload_moe_gpu.py", ROOT / "tests" / "test_fastpath_gpu.py"]


def _log(folder: Path, name: str, commit: str, summary: str) -> None:
    (folder / f"gpu_tests_{name}_w2.log").write_text(
        f"# device: NVIDIA H100 80GB HBM3, 580.159.04 x4; date: 2026-11-27T07:37:01Z\n# Build cuda\n# commit {commit}\n"
        f"tests/x.py::test_a PASSED\n{'=' * 10} {summary} {'=' * 10}\ngpu tests: exit 0\n")


def test_part_names_follow_the_test_files():
    assert [suite_log.part_name(f) for f in FILES] == ["moe", "fastpath"]
    assert suite_log.part_name(Path("tests/test_harness_process_gpu.py")) == "harness_process"


@pytest.mark.parametrize("summary, ok", [("5 passed in 12.3s", True), ("9 passed, 6 skipped in 93.12s (0:01:33)", True),
                                         ("1 failed, 10 passed in 86.76s (0:01:26)", False),
                                         ("2 errors in 3.0s", False), ("6 skipped in 1.0s", False)])
def test_a_file_passes_with_passes_and_no_failure(summary, ok):
    assert suite_log.passed(summary) is ok


def test_the_suite_passes_only_with_every_file_passed_at_one_commit(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "no log: fastpath" in lines[-1]
    _log(tmp_path, "fastpath", "d1fb750", "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "commits: c405229, d1fb750" in lines[-1]
    _log(tmp_path, "fastpath", "c405229", "1 failed, 4 passed in 100.0s (0:01:40)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "failed: fastpath" in lines[-1]
    _log(tmp_path, "fastpath", "c405229", "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert ok and lines[-1] == "suite: all 2 files passed at commit c405229"
    assert "tests/test_workload_moe_gpu.py: 4 passed, 12 skipped in 75.51s (0:01:15)  [c405229; device:" in lines[1]


def test_todo_names_the_files_not_yet_passed_at_the_commit(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    _log(tmp_path, "fastpath", "c405229", "1 failed, 4 passed in 100.0s (0:01:40)")
    assert [p for _f, p in suite_log.todo(2, tmp_path, "c405229", FILES)] == ["fastpath"]
    assert [p for _f, p in suite_log.todo(2, tmp_path, "d1fb750", FILES)] == ["moe", "fastpath"]
    assert [p for _f, p in suite_log.todo(2, tmp_path, "", FILES)] == ["moe", "fastpath"]   # no commit: run all
