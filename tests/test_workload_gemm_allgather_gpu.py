"""GPU tests of the GEMM+AllGather workload through the cuco harness on min(2, GPUs) ranks: the host seed, the
fast path's transform of it and every LSA point of the template verify at the verify shapes on two seeds, under
delayed arrival (the cascade's L2 mode); a candidate that leaves remote rows unwritten fails (W >= 2).
Run with `pytest -m gpu` on a GPU machine (W = 1 on one GPU: remote offsets are not exercised there).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import workload_gpu

from cuco import workloads
from cuco.design_space import Topology

VERIFY_SHAPES = [(512, 256, 384), (1024, 512, 256)]
WL = workloads.get("gemm_allgather")


def _need_two(gpus: int) -> None:
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs, found {gpus}")


@pytest.fixture(scope="module")
def plugin() -> Path:
    return workload_gpu.build_plugin(WL)


def _compile(codes: list[str]) -> list[Path]:
    return workload_gpu.compile_codes(WL, codes)


def _verify(plugin: Path, sos: list[Path], dims: tuple[int, ...], world: int = 2, seeds=(1, 2), mode="thread"):
    return workload_gpu.verify(plugin, sos, dims, world, seeds, mode)


@pytest.mark.gpu
def test_seed_and_fast_path_verify(plugin, world):
    from cuco.fastpath.agent import FastPathAgent

    fast = FastPathAgent(llm=None, check_input=False, run_on_gpu=False).run(WL.seed_code()).code
    seed_so, fast_so = _compile([WL.seed_code(), fast])
    for dims in VERIFY_SHAPES:
        runs = _verify(plugin, [seed_so, fast_so], dims, world)
        assert runs[seed_so].status == "ok", runs[seed_so]
        assert runs[fast_so].status == "ok", runs[fast_so]


@pytest.mark.gpu
def test_every_lsa_point_verifies(plugin, world):
    space = WL.space(Topology(world=world, gin_available=False))
    points = [p for p in space.points() if p.backend == "lsa"]
    sos = _compile([WL.render(p) for p in points])
    for dims in VERIFY_SHAPES:
        runs = _verify(plugin, sos, dims, world)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} of {len(points)} points failed at {dims}: {failed[:5]}"


@pytest.mark.gpu
def test_unwritten_remote_rows_fail_verification(plugin, gpus):
    """Poisoned outputs must be caught: skip the remote-rows GEMM and the check has to fail."""
    _need_two(gpus)
    from cuco.design_space import Directives

    code = WL.render(Directives.from_label("lsa/stream_overlap/block/warp/whole"))
    anchor = "if ((rc = gemm_rows(st, ctx, a_full"  # the remote-rows GEMM; the flag waits stay
    assert anchor in code
    (so,) = _compile([code.replace(anchor, "if (false && (rc = gemm_rows(st, ctx, a_full", 1)])
    runs = _verify(plugin, [so], VERIFY_SHAPES[0], 2, seeds=(1,))
    assert runs[so].status == "verify_failed", runs[so]


@pytest.mark.gpu
def test_fused_gemm_that_ignores_the_flags_fails_verification(plugin, gpus):
    """placement=fused's one persistent GEMM must wait for each chunk's flag: with the flags withheld it reads
    A_full rows the pull kernel (or the local copy) has not written yet (poison, under delayed arrival) and must
    fail."""
    _need_two(gpus)
    from cuco.design_space import Directives

    code = WL.render(Directives.from_label("lsa/fused/signal/cta/1MiB"))
    anchor = "a.flags = g.W > 1 || local_in_flight ? f.chunk : nullptr;"
    assert anchor in code
    honest, ignoring = _compile([code, code.replace(anchor, "a.flags = nullptr;  // fixture: never waits", 1)])
    runs = _verify(plugin, [honest, ignoring], VERIFY_SHAPES[1], 2, seeds=(1,))
    assert runs[honest].status == "ok", runs[honest]
    assert runs[ignoring].status == "verify_failed", runs[ignoring]


NV_WAIT = "nv_wait_kernel<<<1, 32, 0, main>>>"


@pytest.mark.gpu
def test_nvshmem_points_verify_and_one_that_never_waits_fails(plugin, world):
    """backend=nvshmem (one PE per process: process mode at W >= 2, thread mode at W = 1): every point verifies
    under delayed arrival; without its signal waits the GEMM reads rows before they land and fails, at any W
    (its own block arrives through NVSHMEM too)."""
    mode = "process" if world > 1 else "thread"
    points = [p for p in WL.space(Topology(world=world, gin_available=False)).points() if p.backend == "nvshmem"]
    assert len(points) == 6
    codes = [WL.render(p) for p in points]
    assert NV_WAIT in codes[0]
    never = codes[0].replace(NV_WAIT, "if (false) " + NV_WAIT, 1)  # fixture: never waits
    sos = _compile(codes + [never])
    for dims in VERIFY_SHAPES:
        runs = _verify(plugin, sos, dims, world, mode=mode)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} of {len(points)} NVSHMEM points failed at {dims}: {failed[:3]}"
        assert runs[sos[-1]].status == "verify_failed", runs[sos[-1]]


@pytest.mark.gpu
def test_nvshmem_with_two_ranks_in_one_process_is_unsupported_naming_process_mode(plugin, gpus):
    _need_two(gpus)
    from cuco.design_space import Directives

    (so,) = _compile([WL.render(Directives.from_label("nvshmem/split_put_wait/signal/cta/1MiB"))])
    run = _verify(plugin, [so], VERIFY_SHAPES[0], 2, seeds=(1,), mode="thread")[so]
    assert run.status == "unsupported" and "process mode" in run.message, run


@pytest.mark.gpu
def test_host_seed_timed_after_an_lsa_point_at_128_mib_per_rank_does_not_hang(plugin, world):
    """One re-timing repeat in its second order (benchmarks/record.py): parts, an LSA point, then the host seed, on
    full-entropy inputs at 16384x8192x3584 (128 MiB of A per rank at W = 2). With NCCL's lazy connection one rank's
    first host AllGather connected a ring inside its enqueue while its peer waited at the harness's next host
    agreement: a hang in the seed's bench at W = 2 (benchmarks/results/w2/hang_probe/1_default.log)."""
    if world < 2:
        pytest.skip("the hang needs a peer: world >= 2")
    from cuco.design_space import Directives
    from cuco.harness.runner import HarnessRequest, run_harness

    lsa_so, seed_so = _compile([WL.render(Directives.from_label("lsa/stream_overlap/team/copy_engine/whole")),
                                WL.seed_code()])
    res = run_harness(HarnessRequest(plugin, [lsa_so, seed_so], (16384, 8192, 3584), world=world, seeds=(1,),
                                     inputs="full", verify=False, bench=True, parts=True, warmup=5, iters=10,
                                     timeout_s=60, warm_ms=300))
    runs = {Path(r.path): r for r in res.candidates}
    assert runs[lsa_so].status == "ok", runs[lsa_so]
    assert runs[seed_so].status == "ok", runs[seed_so]
