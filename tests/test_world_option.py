"""The suite's `--world` option: a bad value is a usage error naming the valid sizes; the sizes not selected, and
those this machine has too few GPUs for, skip with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = "tests/test_workload_kv_transfer_gpu.py::test_broken_candidates_fail_verification"


def _pytest(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", TARGET, "-q", "-rs", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_world_size_outside_the_set_is_a_usage_error_naming_the_sizes():
    out = _pytest("--world", "3")
    assert out.returncode == 4, out.stdout + out.stderr
    assert "--world takes sizes among 1, 2, 4, 8; got '3'" in out.stderr


def test_unselected_world_sizes_skip_with_the_reason():
    out = _pytest("--world", "2,4")
    text = out.stdout
    assert "world 1 not selected (--world 2,4)" in text and "world 8 not selected (--world 2,4)" in text, text
    assert "world 1 needs" not in text
    assert "4 skipped" in text, text
