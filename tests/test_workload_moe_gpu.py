"""GPU tests of the MoE workload through the cuco harness on min(2, GPUs) ranks: the host seed, its fast-path
transform and every LSA point verify at the verify shapes on two seeds under delayed arrival (the cascade's L2
mode); the fixtures (moe/fixtures.py: a dropped token, a dropped slot output, a wrong gate, an FFN that never
waits for arriving rows, LSA and NVSHMEM, and at W >= 2 outputs copied back before their owners computed them)
must fail. Run with `pytest -m gpu` on a GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import workload_gpu

from cuco import workloads
from cuco.design_space import Topology
from cuco.workloads.moe import fixtures

WL = workloads.get("moe")
VERIFY = ["verify-top2", "verify-top1"]


@pytest.fixture(scope="module")
def plugin() -> Path:
    return workload_gpu.build_plugin(WL)


def _compile(codes: list[str]) -> list[Path]:
    return workload_gpu.compile_codes(WL, codes)


def _verify(plugin: Path, sos: list[Path], shape: str, world: int, seeds=(1, 2), mode="thread"):
    return workload_gpu.verify(plugin, sos, WL.parse_shape(shape).dims, world, seeds, mode, timeout_s=120)


@pytest.mark.gpu
def test_seed_and_fast_path_verify(plugin, world):
    from cuco.fastpath.agent import FastPathAgent

    fast = FastPathAgent(llm=None, check_input=False, run_on_gpu=False).run(WL.seed_code()).code
    seed_so, fast_so = _compile([WL.seed_code(), fast])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, [seed_so, fast_so], shape, world)
        assert runs[seed_so].status == "ok", runs[seed_so]
        assert runs[fast_so].status == "ok", runs[fast_so]


@pytest.mark.gpu
def test_every_lsa_point_verifies(plugin, world):
    points = list(WL.space(Topology(world=world, nodes=1, gin_available=False, nvshmem_available=False)).points())
    sos = _compile([WL.render(p) for p in points])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} of {len(points)} points failed at {shape}: {failed[:5]}"


@pytest.mark.gpu
def test_broken_candidates_fail_verification(plugin, world):
    sos = _compile([make() for make in fixtures.FIXTURES.values()])
    runs = _verify(plugin, sos, "verify-top2", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(fixtures.FIXTURES, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong


@pytest.mark.gpu
def test_outputs_that_never_wait_fail_verification(plugin, world):
    """stream_overlap: the owners store this rank's slots' outputs into its back rows after their (delayed)
    dispatch; a combine that does not wait for the owners' signals reads poison (rank 0's owner starts D / 2 later:
    the delay is staggered by rank). W >= 2 only: at W = 1 no output comes from another rank."""
    if world < 2:
        pytest.skip("no output comes from another rank at W = 1")
    sos = _compile([make() for make in fixtures.MULTI_GPU_FIXTURES.values()])
    runs = _verify(plugin, sos, "verify-top2", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(fixtures.MULTI_GPU_FIXTURES, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong


@pytest.mark.gpu
def test_nvshmem_points_verify_and_one_that_never_waits_fails(plugin, world):
    """backend=nvshmem (process mode at W >= 2: one PE per process): every point verifies under delayed arrival;
    without its own-rows wait the FFN reads rows before their put lands and fails, at any W."""
    mode = "process" if world > 1 else "thread"
    points = [p for p in WL.space(Topology(world=world, nodes=1, gin_available=False)).points()
              if p.backend == "nvshmem"]
    assert len(points) == 3 and fixtures.NVSHMEM_BASE in {p.label() for p in points}
    sos = _compile([WL.render(p) for p in points] + [fixtures.nvshmem_never_waits()])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world, mode=mode)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} NVSHMEM points failed at {shape}: {failed}"
        assert runs[sos[-1]].status == "verify_failed", (shape, runs[sos[-1]])


# ---- the compute library's FFN waiting for rows that arrive while it runs -------------------------------------

def _ffn_lib():
    import ctypes

    from cuco.kit.compute import build_compute
    from cuco.toolchain import default_toolchain

    lib = ctypes.CDLL(str(build_compute(WL, default_toolchain()).library))
    vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    lib.cuco_moe_ffn_create_ex.argtypes = [ctypes.POINTER(vp), i32, i64, i64, i32, i32, i32]
    lib.cuco_moe_ffn_run_arrival.argtypes = [vp, i32] + [vp] * 12 + [i64, vp]
    lib.cuco_moe_ffn_destroy.argtypes = [vp]
    return lib


@pytest.mark.gpu
@pytest.mark.parametrize("waits", [True, False], ids=["waits", "never_waits"])
def test_ffn_computes_rows_that_arrive_while_it_runs(gpus, waits):
    """cuco_moe_ffn_run_arrival: the rows of x start as NaN and land chunk by chunk from another stream 20 ms after
    the FFN is enqueued, each chunk's flag raised after its copy. The FFN that waits on the flags gives exactly the
    output of the FFN run on the rows already there; the same call without the flags (the control) reads NaN rows,
    so this test can fail. The FFN keeps 8 SMs free for the copies: its waiting CTAs hold theirs. (A first version
    launched the FFN before the copies' kernels had ever run: their lazy loading waited for the spinning FFN and the
    process hung, on one H200.)"""
    if gpus < 1:
        pytest.skip("needs a GPU")
    import ctypes

    import torch

    lib = _ffn_lib()
    dev, H, I, chunk = torch.device("cuda"), 512, 256, 64
    counts, experts = [300, 212, 37], [1, 0, 1]  # groups need not be in expert order
    n = sum(counts)
    g = torch.Generator(device=dev).manual_seed(11)
    x_true = torch.randn(n, H, device=dev, generator=g).bfloat16()
    w1 = (torch.randn(2, 2 * I, H, device=dev, generator=g) / H ** 0.5).bfloat16()
    w2 = (torch.randn(2, H, I, device=dev, generator=g) / I ** 0.5).bfloat16()
    rows = torch.tensor(counts, dtype=torch.int32, device=dev)
    offs = torch.tensor([0, counts[0], counts[0] + counts[1]], dtype=torch.int64, device=dev)
    ex = torch.tensor(experts, dtype=torch.int32, device=dev)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    p = lambda t: ctypes.c_void_p(t.data_ptr() if t is not None else 0)

    def run(plan, x, flags, epoch, stream):
        h1 = torch.empty(n, 2 * I, device=dev, dtype=torch.bfloat16)
        act = torch.empty(n, I, device=dev, dtype=torch.bfloat16)
        y = torch.full((n, H), 7.0, device=dev, dtype=torch.bfloat16)
        assert lib.cuco_moe_ffn_run_arrival(plan, len(counts), p(x), p(w1), p(w2), p(h1), p(act), p(y), None, p(rows),
                                            p(offs), p(ex), p(flags), p(epoch), chunk,
                                            ctypes.c_void_p(stream.cuda_stream)) == 0
        return y, (h1, act)

    plans = [ctypes.c_void_p(), ctypes.c_void_p()]
    assert lib.cuco_moe_ffn_create_ex(ctypes.byref(plans[0]), 4, H, I, 0, 0, 0) == 0
    assert lib.cuco_moe_ffn_create_ex(ctypes.byref(plans[1]), 4, H, I, sms - 8, 0, 1) == 0
    try:
        main = torch.cuda.current_stream()
        y_ref, _ = run(plans[0], x_true, None, None, main)
        torch.cuda.synchronize()
        x = torch.full((n, H), float("nan"), device=dev, dtype=torch.bfloat16)
        flags = torch.zeros((n + chunk - 1) // chunk, dtype=torch.int32, device=dev)
        epoch = torch.ones(1, dtype=torch.int32, device=dev)
        side = torch.cuda.Stream()

        def land(cycles: int) -> None:  # on `side`: wait, then each chunk's rows and its flag
            with torch.cuda.stream(side):
                torch.cuda._sleep(cycles)
                for c in range(flags.numel()):
                    x[c * chunk:(c + 1) * chunk].copy_(x_true[c * chunk:(c + 1) * chunk])
                    flags[c].fill_(1)

        # the side kernels' first launch loads them (CUDA's lazy loading), which can wait for the running GEMM
        # that waits for them: launch them once before, as a caller of run_arrival launches its flag raisers first
        land(1)
        torch.cuda.synchronize()
        x.fill_(float("nan"))
        flags.zero_()
        torch.cuda.synchronize()
        land(40_000_000)  # about 20 ms at 2 GHz: the FFN below has started long before the rows land
        y, keep = run(plans[1], x, flags if waits else None, epoch, main)
        torch.cuda.synchronize()
        if waits:
            assert torch.equal(y, y_ref)
        else:
            assert not torch.equal(y, y_ref) and bool(torch.isnan(y.float()).any())
    finally:
        for plan in plans:
            lib.cuco_moe_ffn_destroy(plan)
