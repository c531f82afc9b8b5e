"""GPU tests of the GEMM+AllGather workload on 2 GPUs: the seed and every LSA point verify at the verify shapes.

They use the workload's standalone driver (dev/driver.cu: one process, one thread per GPU, the cuco ABI);
run with `pytest -m gpu tests/test_workload_gemm_allgather_gpu.py` on a machine with >= 2 GPUs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuco.toolchain import Toolchain
from cuco.workloads.gemm_allgather.dev.devrun import build, point_labels, run_driver, so_name

VERIFY_DIMS = ["512,256,384", "1024,512,256"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, dict[str, Path]]:
    out = tmp_path_factory.mktemp("gemm_ag")
    logs: list[str] = []
    paths = build(point_labels(("lsa",)), out, Toolchain.detect(), jobs=os.cpu_count() or 2, log=logs.append)
    assert not logs, "\n".join(logs)
    return out, paths


def _need_two(gpus: int) -> None:
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs, found {gpus}")


@pytest.mark.gpu
def test_seed_verifies(built, gpus):
    _need_two(gpus)
    _out, paths = built
    recs = run_driver(paths["driver"], paths["plugin"], [paths["seed"]], VERIFY_DIMS, seeds="1,2")
    assert [r for r in recs if "error" in r] == []
    assert len(recs) == 2 and all(r["verified"] for r in recs), recs


@pytest.mark.gpu
def test_every_lsa_point_verifies(built, gpus):
    _need_two(gpus)
    _out, paths = built
    labels = point_labels(("lsa",))
    recs = run_driver(paths["driver"], paths["plugin"], [paths[x] for x in labels], VERIFY_DIMS, seeds="1,2")
    assert [r for r in recs if "error" in r] == []
    passed = {(r["dims"], r["candidate"]) for r in recs if r.get("verified")}
    missing = [(d, x) for d in VERIFY_DIMS for x in labels if (d, so_name(x)) not in passed]
    assert not missing, f"{len(missing)} (shape, point) pairs did not verify, e.g. {missing[:5]}: " + str(
        [r for r in recs if not r.get("verified")][:3])


@pytest.mark.gpu
def test_poisoned_output_is_rejected(built, gpus, tmp_path):
    """The check must fail a candidate that leaves part of C unwritten (it would stay NaN poison)."""
    _need_two(gpus)
    out, paths = built
    bad = (out / "lsa.stream_overlap.block.warp.whole.cu").read_text().replace(
        "for (int s = 1; s < g.W; ++s) {\n    const int p = (g.me + s) % g.W;\n    for (int c = 0; c < g.nchunks; ++c) {\n"
        "      const int64_t r0 = p * g.Mr",
        "for (int s = 1; s < 1; ++s) {\n    const int p = (g.me + s) % g.W;\n    for (int c = 0; c < g.nchunks; ++c) {\n"
        "      const int64_t r0 = p * g.Mr")
    assert "s < 1; ++s" in bad
    src = tmp_path / "skip_remote.cu"
    src.write_text(bad)
    from cuco.toolchain import csrc_dir

    r = Toolchain.detect().compile([src], tmp_path / "skip_remote.so", include_dirs=[csrc_dir() / "include"],
                                   libraries=("cublasLt",))
    assert r.ok, r.log
    recs = run_driver(paths["driver"], paths["plugin"], [r.output], VERIFY_DIMS[:1], seeds="1")
    assert recs and not any(x.get("verified") for x in recs), recs
