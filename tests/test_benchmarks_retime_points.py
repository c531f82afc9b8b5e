"""benchmarks/retime_points.py: named points become the row's labels (fast path, best, the rest by name), and
bad --points are refused before anything is built."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import retime_points  # noqa: E402


def test_the_fast_path_keeps_its_label_and_the_first_other_point_is_best():
    got = retime_points.labelled(["fastpath", "lsa/fused/world/cta/16MiB", "lsa/deferred/world/cta/whole"])
    assert got == {"fastpath": "fastpath", "lsa/fused/world/cta/16MiB": "best",
                   "lsa/deferred/world/cta/whole": "lsa/deferred/world/cta/whole"}
    assert retime_points.labelled(["a/b"]) == {"a/b": "best"}


@pytest.mark.parametrize("points, said", [("fastpath,fastpath", "twice"), ("seed,a/b", "always re-timed"),
                                          (" , ", "names no point")])
def test_bad_points_are_refused_naming_why(points: str, said: str):
    with pytest.raises(SystemExit, match=said):
        retime_points.main(["--workload", "gemm_allgather", "--world", "2", "--shape", "512,256,384",
                            "--points", points])
