"""benchmarks/gpu_w.sh keeps a failed run of a GPU test file at the same commit before a re-run replaces its log,
so the suite's summary can name it (benchmarks/suite_log.py); a passed run or another commit's is not kept. The
part runs here for real, its pytest cut short (what it then logs does not matter here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _old_log(out: Path, commit: str, exit_code: int) -> str:
    text = (f"# device: NVIDIA H100 80GB HBM3, 580.159.04 x4; date: 2026-11-27T15:31:41Z\n# commit {commit}\n"
            f"{'=' * 10} 1 failed, 1 passed in 28.08s {'=' * 10}\ngpu tests: exit {exit_code}\n")
    (out / "gpu_tests_harness_process_w2.log").write_text(text)
    return text


def _part(out: Path, keep: Path, commit: str) -> None:
    env = {**os.environ, "CUCO_COMMIT": commit, "KEEP_DIR": str(keep), "TEST_TIMEOUT": "2",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run(["bash", "benchmarks/gpu_w.sh", "2", "tests-harness_process", str(out)], cwd=ROOT, env=env,
                   capture_output=True, timeout=300, check=False)


@pytest.mark.parametrize("old_commit, exit_code, kept", [("abc1234", 1, True), ("abc1234", 0, False),
                                                         ("0ld0000", 1, False)])
def test_a_failed_run_at_the_commit_is_kept_before_the_re_run(tmp_path, old_commit, exit_code, kept):
    out, keep = tmp_path / "w2", tmp_path / "keep"
    out.mkdir()
    old = _old_log(out, old_commit, exit_code)
    _part(out, keep, "abc1234")
    new = (out / "gpu_tests_harness_process_w2.log").read_text()
    assert "# commit abc1234" in new and new != old   # the re-run wrote its own log
    failed = out / "gpu_tests_harness_process_w2.failed-1.log"
    assert failed.is_file() is kept
    assert (keep / "gpu_tests_harness_process_w2.log.failed-1").is_file() is kept
    if kept:
        assert failed.read_text() == old
