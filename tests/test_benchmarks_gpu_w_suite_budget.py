"""benchmarks/gpu_w.sh's suite part starts a GPU test file only when its last logged run, and a fifth more, fits in
the part's time left (SUITE_S): a file cut off by the limit spends the time and proves nothing, while a shorter file
further down the list may still fit. The part runs here for real; no file is started, so no GPU is needed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _log(out: Path, name: str, seconds: str) -> None:
    (out / f"gpu_tests_{name}_w2.log").write_text(
        f"# device: NVIDIA H200, 580.159.04 x2; date: 2026-11-28T21:10:15Z\n# commit abc1234\n"
        f"{'=' * 10} 5 passed, 3 skipped in {seconds}s (0:01:46) {'=' * 10}\ngpu tests: exit 0\n")


def test_a_file_whose_last_run_does_not_fit_is_not_started_and_the_next_is_weighed(tmp_path):
    out = tmp_path / "w2"
    out.mkdir()
    _log(out, "program", "300.12")
    _log(out, "harness_process", "95.50")
    todo = tmp_path / "todo"
    todo.write_text("tests/test_program_gpu.py program\ntests/test_harness_process_gpu.py harness_process\n")
    env = {**os.environ, "CUCO_COMMIT": "def5678", "KEEP_DIR": str(tmp_path / "keep"), "SUITE_TODO": str(todo),
           "SUITE_S": "100", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(["bash", "benchmarks/gpu_w.sh", "2", "suite", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("suite: tests/")]
    assert len(lines) == 2, run.stdout + run.stderr
    assert lines[0].startswith("suite: tests/test_program_gpu.py not started (needs about 370 s, its last run took "
                               "300 s,") and lines[0].endswith(" s left)")
    assert lines[1].startswith("suite: tests/test_harness_process_gpu.py not started (needs about 124 s,")
    # neither log was replaced by a run
    assert "# commit abc1234" in (out / "gpu_tests_program_w2.log").read_text()
    assert "# commit abc1234" in (out / "gpu_tests_harness_process_w2.log").read_text()
