"""benchmarks/graph_replay.py and the points helper it shares with benchmarks/sanitize.py, without a GPU: which
points run by default, the rows and table it prints from a harness result, and the exit rule."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import graph_replay  # noqa: E402
import points  # noqa: E402

from cuco.harness import HarnessResult  # noqa: E402

FIXTURES = Path(__file__).parent / "fixtures" / "harness"


def _results(folder: Path, name: str, bests: list[str]) -> None:
    (folder / name).write_text(json.dumps({"rows": [{"shape": f"s{i}", "best_point": b} for i, b in enumerate(bests)]}))


def test_default_points_are_the_fast_path_the_recorded_best_points_and_the_seed(tmp_path: Path):
    _results(tmp_path, "kv_transfer_w1.json", ["lsa/deferred/world/cta/whole", "fastpath",
                                               "lsa/stream_overlap/world/copy_engine/whole",
                                               "lsa/deferred/world/cta/whole", "seed"])
    got = graph_replay.default_points("kv_transfer", 1, tmp_path)
    assert got[0] == points.FAST_PATH and got[-1] == points.SEED
    assert got[1:-1] == ["lsa/deferred/world/cta/whole", "lsa/stream_overlap/world/copy_engine/whole"]  # distinct
    # a W = 2 file is read before W = 1; without one, W = 1's (the workload's plain file, where that is all there is)
    _results(tmp_path, "gemm_allgather_w2.json", ["lsa/stream_overlap/team/copy_engine/whole"])
    _results(tmp_path, "gemm_allgather.json", ["lsa/fused/world/cta/16MiB"])
    assert points.best_points("gemm_allgather", 2, tmp_path) == ["lsa/stream_overlap/team/copy_engine/whole"]
    assert points.best_points("gemm_allgather", 4, tmp_path) == ["lsa/fused/world/cta/16MiB"]
    with pytest.raises(SystemExit, match="names a best point"):
        points.best_points("no_such_workload", 2, tmp_path)
    # the committed files name some: the default of every benchmark run
    assert points.best_points("gemm_allgather", 2)


def test_a_label_the_workload_cannot_render_is_named():
    from cuco import workloads

    with pytest.raises(SystemExit, match="'not/a/label'"):
        points.point_codes(workloads.get("gemm_allgather"), ["not/a/label"])
    codes = points.point_codes(workloads.get("gemm_allgather"), [points.SEED, "lsa/stream_overlap/team/cta/whole"])
    assert list(codes) == [points.SEED, "lsa/stream_overlap/team/cta/whole"] and all(codes.values())


def test_the_fast_path_of_a_workload_with_a_compute_library_compiles_with_its_header():
    """Without the compute library's include folder the rewrite of a seed that includes its header does not
    compile (retime_points on ring attention: 'cuco/compute/attention_cp.h not found')."""
    from cuco import workloads
    from cuco.toolchain import ToolchainError, default_toolchain

    try:
        default_toolchain()
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    code = points.point_codes(workloads.get("attention_cp"), [points.FAST_PATH])[points.FAST_PATH]
    assert "cuco/compute/attention_cp.h" in code and "ncclDevComm" in code


def test_rows_table_and_exit_rule_follow_the_graph_records():
    result = HarnessResult.from_file(FIXTURES / "graph_result.json")
    ok = SimpleNamespace(ok=True, so_path=Path("x.so"), log_excerpt="")
    bad = SimpleNamespace(ok=False, so_path=None, log_excerpt="x.cu(3): error: expected a ';'")
    names = ["fastpath", "a/b", "c/d", "e/f", "broken", "seed"]
    built = [(names[0], ok), (names[1], ok), (names[2], ok), (names[3], ok), (names[4], bad)]
    rows = graph_replay.rows_of(names, built, result)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok", "verify_failed", "compile_failed"]
    assert [(r["graph"] or {}).get("status") for r in rows] == ["passed", "failed", "not_capturable", "not_run", None]
    assert [graph_replay.clean(r) for r in rows] == [True, False, True, False, False]
    text = graph_replay.table(rows)
    assert "| fastpath | ok | passed | - |  |" in text
    assert "| a/b | ok | failed | 1 (seed 2000007) | rank 0: replay 1, seed 2000007:" in text
    assert "| broken | compile_failed | - | - | x.cu(3): error" in text
