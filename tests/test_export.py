"""Exporting a candidate, on the CPU: which runs and candidates can become an op, and what is said otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuco.candidate import Candidate, LevelResult
from cuco.db import CandidateDB
from cuco.design_space import Directives
from cuco.export import ExportError, ExportSource

POINT = Directives.from_label("lsa/deferred/world/cta/whole")


def _run(tmp_path: Path, status_passed: bool = True) -> tuple[Path, Candidate]:
    run = tmp_path / "run"
    run.mkdir()
    c = Candidate(code="// code", workload="gemm_allgather", directives=POINT, mutation="directive")
    for level in ("static", "compile", "verify"):
        c = c.with_result(LevelResult(level, True))
    c = c.with_result(LevelResult("bench", status_passed, "" if status_passed else "slow",
                                  data={"shape": "1024x512x256", "world": 1}))
    c = c.evolve(metrics={"time_ms": 0.5})
    with CandidateDB(run / "candidates.db") as db:
        db.add(c)
    return run, c


def test_a_run_without_best_says_how_to_get_one(tmp_path):
    run, _ = _run(tmp_path)
    with pytest.raises(ExportError, match="no best/.*candidate_id="):
        ExportSource.from_run(run)


def test_a_candidate_is_found_by_id_with_its_shape_world_and_harness_time(tmp_path):
    run, c = _run(tmp_path)
    src = ExportSource.from_run(run, c.id)
    assert src.workload.name == "gemm_allgather" and src.shape.dims == (1024, 512, 256) and src.world == 1
    assert src.point == POINT.label() and src.harness_ms == 0.5
    (run / "best").mkdir()
    (run / "best" / "best.json").write_text(json.dumps({"kind": "workload", "candidate_id": c.id}))
    assert ExportSource.from_run(run / "best").candidate_id == c.id


def test_unverified_unknown_and_program_candidates_are_refused(tmp_path):
    run, c = _run(tmp_path, status_passed=False)
    with pytest.raises(ExportError, match="only a verified and timed candidate"):
        ExportSource.from_run(run, c.id)
    with pytest.raises(ExportError, match="no candidate 'nope'"):
        ExportSource.from_run(run, "nope")
    (run / "best").mkdir()
    (run / "best" / "best.json").write_text(json.dumps({"kind": "program", "candidate_id": c.id}))
    with pytest.raises(ExportError, match="run of a program"):
        ExportSource.from_run(run)
    with pytest.raises(ExportError, match="holds no candidates.db"):
        ExportSource.from_run(tmp_path, "x")


def test_the_workload_describes_its_tensors_for_the_op():
    from cuco import workloads

    w = workloads.get("gemm_allgather")
    t = w.tensors(w.parse_shape("1024,512,256"), 2)
    assert t["A_local"] == ((512, 512), "bfloat16") and t["C"] == ((1024, 256), "bfloat16")
    assert list(t) == ["A_local", "B", "C", "A_full"]   # the plugin's buffer order


def test_importing_the_export_loads_no_torch():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import cuco.export, sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_a_run_made_by_another_cuco_version_is_refused_naming_the_fix(tmp_path):
    from cuco import __version__

    run, c = _run(tmp_path)
    manifest = {"workload": "gemm_allgather", "program_sha256": "0" * 64, "shape": "1024x512x256", "world": 1,
                "seed": 0, "evaluations": 1, "cuco_version": "0.0.0-other", "toolchain": {}, "device": "cpu"}
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match=rf"made by cuco 0.0.0-other, this is cuco {__version__}.*`cuco run` again"):
        ExportSource.from_run(run, c.id)
    (run / "manifest.json").write_text(json.dumps({**manifest, "cuco_version": __version__}))
    assert ExportSource.from_run(run, c.id).candidate_id == c.id
    (run / "manifest.json").write_text("{not json")
    with pytest.raises(ExportError, match="manifest.json cannot be read"):
        ExportSource.from_run(run, c.id)


def test_tensors_of_the_wrong_shape_dtype_or_layout_are_refused_naming_the_fix():
    torch = pytest.importorskip("torch", reason="the CPU build of torch (pip install torch==2.13.0) runs this")
    from cuco.export.op import check_tensor

    want = torch.empty(4, 6, dtype=torch.bfloat16)
    check_tensor("input A", torch.zeros(4, 6, dtype=torch.bfloat16), want, "candidate c1")  # accepted
    with pytest.raises(ExportError, match=r"input A: expected \(4, 6\) torch.bfloat16 \(what candidate c1 was built "
                                          r"for\), got \(4, 6\) torch.float32"):
        check_tensor("input A", torch.zeros(4, 6), want, "candidate c1")
    with pytest.raises(ExportError, match=r"got \(6, 4\)"):
        check_tensor("input A", torch.zeros(6, 4, dtype=torch.bfloat16), want, "candidate c1")
    with pytest.raises(ExportError, match=r"input A is not contiguous \(strides \(1, 4\)\); pass A.contiguous\(\)"):
        check_tensor("input A", torch.zeros(6, 4, dtype=torch.bfloat16).t(), want, "candidate c1")
    with pytest.raises(ExportError, match=r"out C is on meta, the op on cpu: move it with .to\('cpu'\)$"):
        check_tensor("out C", torch.empty(4, 6, dtype=torch.bfloat16, device="meta"), want, "candidate c1")


@given(world=st.integers(1, 8), graph_safe=st.booleans(), capturing=st.booleans())
def test_capture_is_refused_only_at_world_above_one_without_graph_safe(world, graph_safe, capturing):
    from cuco.export.op import capture_refusal

    why = capture_refusal(world, graph_safe, capturing, "abc")
    assert (why is not None) == (capturing and world > 1 and not graph_safe)
    if why:
        assert "graph_replay.py" in why and "graph_safe=True" in why and f"world {world}" in why


def test_a_run_whose_best_is_the_host_seed_exports_the_seed_from_best(tmp_path):
    """Nothing beat the host seed: best/ holds the seed (point 'original', not a candidate of the database), and
    that is what is exported, at the run's shape and world."""
    from cuco.workloads import get

    run, _ = _run(tmp_path)
    seed = get("gemm_allgather").seed_code()
    (run / "best").mkdir()
    (run / "best" / "kernel.cu").write_text(seed)
    (run / "best" / "best.json").write_text(json.dumps({
        "kind": "workload", "workload": "gemm_allgather", "candidate_id": "orig", "mutation": "original",
        "point": "original", "metrics": {"time_ms": 0.7}, "bench": {"shape": "1024x512x256", "world": 2}}))
    src = ExportSource.from_run(run)
    assert src.code == seed and src.point == "original" and src.world == 2 and src.harness_ms == 0.7
    assert src.shape.dims == (1024, 512, 256)
