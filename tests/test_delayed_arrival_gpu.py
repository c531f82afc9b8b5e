"""Races must fail verification: under delayed arrival (the harness holds the side stream back before each
verified launch) a candidate that never waits for its data reads poison, even at W = 1; correct candidates
still pass. Run with `pytest -m gpu` on a machine with >= 1 GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuco import workloads
from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US
from cuco.evaluate.static import check_static
from cuco.design_space import Topology
from cuco.kit.sample import covering_points
from cuco.workloads.gemm_allgather.fixtures import never_waits
from cuco.toolchain import ToolchainError

WL = workloads.get("gemm_allgather")
SHAPE = (512, 256, 384)


def test_never_waits_fixture_is_a_legal_candidate():
    """It passes the static check and compiles: only verification can catch it."""
    code = never_waits()
    assert "ctx->side_stream /* never waits for it */)" in code
    assert check_static(code).passed
    try:
        (so,) = _compile([code])
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    assert so.is_file()


def _run(sos: list[Path], delay_us: float, world: int = 1):
    from cuco.harness.build import build_shared
    from cuco.harness.runner import HarnessRequest, run_harness

    plugin = build_shared(WL.plugin_path(), WL.libraries)
    res = run_harness(HarnessRequest(plugin, sos, SHAPE, world=world, seeds=(1, 2), verify=True, bench=False,
                                     timeout_s=60, delay_comm_us=delay_us))
    return {Path(r.path): r for r in res.candidates}


def _compile(codes: list[str]) -> list[Path]:
    from cuco.evaluate.compile import Compiler
    from cuco.kit.compute import link_options

    compiler = Compiler()
    link = link_options(WL, compiler.toolchain)
    outcomes = compiler.compile_many(codes, link.libraries, link.include_dirs, link.extra)
    assert all(o.ok for o in outcomes), [o.log_excerpt for o in outcomes if not o.ok][:2]
    return [o.so_path for o in outcomes]


@pytest.mark.gpu
def test_never_waits_fails_under_delayed_arrival_and_correct_points_pass(gpus):
    if gpus < 1:
        pytest.skip("needs a GPU")
    points = [p for p in covering_points(WL.space(Topology(world=1, gin_available=False))) if p.backend == "lsa"]
    sos = _compile([never_waits(), *(WL.render(p) for p in points)])
    runs = _run(sos, DEFAULT_VERIFY_DELAY_US)
    assert runs[sos[0]].status == "verify_failed", runs[sos[0]]
    failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos[1:])
              if runs[so].status != "ok"]
    assert not failed, failed
