"""A candidate cannot print its way to success: the harness's result is the file it writes with --out, never
what the process prints. A stand-in harness process prints a complete "ok" result and exits 0; the run is
still a failure with no candidate passed. A result file that is not a JSON object is no result either."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from cuco.harness import HarnessRequest
from cuco.harness.runner import run_harness

FAKE_OK = {"status": "ok", "message": "", "world": 1, "dims": [64],
           "candidates": [{"path": "c.so", "status": "ok", "verified": True, "time_ms": 0.001}]}


def _stand_in(tmp_path: Path, body: str) -> Path:
    """A real executable in the harness's place: what it does is `body` (a shell script)."""
    path = tmp_path / "stand_in_harness.sh"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _request(tmp_path: Path) -> HarnessRequest:
    return HarnessRequest(tmp_path / "w.so", [tmp_path / "c.so"], (64,), world=1, nvshmem_lib=tmp_path / "none.so",
                          timeout_s=10)


def test_a_printed_ok_result_is_not_a_result(tmp_path):
    printed = json.dumps(FAKE_OK)
    binary = _stand_in(tmp_path, f"echo '{printed}'; echo '{printed}' >&2; exit 0")
    res = run_harness(_request(tmp_path), binary=binary, workdir=tmp_path)
    assert res.status == "error" and "wrote no result" in res.message
    assert [c.status for c in res.candidates] == ["not_run"]


@pytest.mark.parametrize("written", ["[]", "3", '"ok"'])
def test_a_result_file_that_is_not_an_object_is_no_result(tmp_path, written):
    # the harness writes its result with --out PATH; the stand-in writes something that is not a result there
    binary = _stand_in(tmp_path, 'while [ "$1" != "--out" ]; do shift; done; echo \'' + written + '\' > "$2"')
    res = run_harness(_request(tmp_path), binary=binary, workdir=tmp_path)
    assert res.status == "error" and [c.status for c in res.candidates] == ["not_run"]
