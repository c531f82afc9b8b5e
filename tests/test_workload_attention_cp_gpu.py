"""GPU tests of the ring-attention workload at every world size the machine has GPUs for (`--world` picks some):
the compute library's attention and merge match torch's fp32 attention, on every GPU of one process; the host
seed, its fast-path transform and a covering sample of LSA points verify on two seeds under delayed arrival (the
cascade's L2 mode) at every verify shape; every fixture (skipped ring step, merge without the LSE, never waits,
the gathered form never waiting) fails. Run with `pytest -m gpu` on a GPU machine."""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest
import workload_gpu

from cuco import workloads
from cuco.design_space import Directives, Topology
from cuco.kit.sample import covering_points
from cuco.workloads.attention_cp import fixtures

WL = workloads.get("attention_cp")
VERIFY = ["verify-gqa-causal", "verify-mha-full", "verify-d32-causal"]
#: Beyond the covering sample (which meets sync_scope=signal only on GIN): the signal protocols, copy-engine
#: pushes (with one arrival flag per reader, or one barrier), the fixtures' base points, and the gathered forms
#: (attend=hybrid, gathered) under each sync scope and both placements.
MORE_POINTS = ["lsa/stream_overlap/signal/warp/whole/attend=ring", "lsa/split_put_wait/signal/cta/whole/attend=ring",
               "lsa/deferred/signal/thread/whole/attend=ring", "lsa/split_put_wait/world/copy_engine/whole/attend=ring",
               "lsa/stream_overlap/team/copy_engine/whole/attend=ring",
               "lsa/fused/world/copy_engine/1MiB/attend=ring", fixtures.FUSED_BASE, fixtures.STEPS_BASE,
               fixtures.GATHERED_BASE, fixtures.GATHERED_FUSED_BASE, "lsa/fused/world/warp/whole/attend=gathered",
               "lsa/stream_overlap/world/warp/whole/attend=hybrid",
               "lsa/stream_overlap/signal/thread/whole/attend=hybrid", "lsa/deferred/signal/cta/whole/attend=gathered",
               "lsa/deferred/team/warp/whole/attend=hybrid"]


def _need_gpu(gpus: int) -> None:
    if gpus < 1:
        pytest.skip("needs a GPU")


@pytest.fixture(scope="module")
def plugin() -> Path:
    return workload_gpu.build_plugin(WL)


def _compile(codes: list[str]) -> list[Path]:
    return workload_gpu.compile_codes(WL, codes)


def _verify(plugin: Path, sos: list[Path], shape: str, world: int):
    return workload_gpu.verify(plugin, sos, WL.parse_shape(shape).dims, world, timeout_s=120)


# ---- the compute library against torch ------------------------------------------------------------------

CASES = [  # (q rows, k rows, HQ, HKV, D, causal); the last two have more tiles than an H100 or H200 has SMs, so
    # the persistent FMHA's CTAs (the bf16 single step at D 32 and 64) each walk several tiles
    (512, 512, 8, 2, 128, 1), (384, 768, 4, 4, 64, 0), (256, 256, 8, 8, 32, 1), (640, 256, 16, 4, 64, 0),
    (1024, 1024, 32, 8, 128, 0), (2048, 2048, 16, 4, 64, 1), (1536, 1024, 32, 32, 32, 0),
]


def _lib():
    from cuco.kit.compute import build_compute
    from cuco.toolchain import default_toolchain

    lib = ctypes.CDLL(str(build_compute(WL, default_toolchain()).library))
    lib.cuco_attn_block_f32.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2 + [ctypes.c_int] * 3 + [
        ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]
    lib.cuco_attn_block_bf16.argtypes = lib.cuco_attn_block_f32.argtypes
    lib.cuco_attn_merge_f32.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int, ctypes.c_int,
                                                                 ctypes.c_int64, ctypes.c_void_p]
    return lib


def _reference(torch, q, k, v, causal):
    """fp32 attention and LSE, [S, H, D] layouts, GQA by repeating KV heads."""
    g = q.shape[1] // k.shape[1]
    qf, kf, vf = (t.float().transpose(0, 1) for t in (q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)))
    s = qf @ kf.transpose(1, 2) / q.shape[2] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return (s.softmax(-1) @ vf).transpose(0, 1), s.logsumexp(-1)


def _attend(torch, lib, q, k, v, causal):
    """The library's attention: fp32 O and the LSE."""
    sq, hq, d = q.shape
    o = torch.empty(q.shape, device="cuda", dtype=torch.float32)
    lse = torch.empty(hq, sq, device="cuda", dtype=torch.float32)
    rc = lib.cuco_attn_block_f32(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), sq,
                                 k.shape[0], hq, k.shape[1], d, sq, causal, torch.cuda.current_stream().cuda_stream)
    assert rc == 0
    return o, lse


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_compute_library_attention_matches_torch(gpus, case):
    _need_gpu(gpus)
    import torch

    sq, sk, hq, hkv, d, causal = case
    torch.manual_seed(sum(case))
    q = torch.randn(sq, hq, d, device="cuda").bfloat16()
    k, v = (torch.randn(sk, hkv, d, device="cuda").bfloat16() for _ in range(2))
    lib = _lib()
    o32, lse = _attend(torch, lib, q, k, v, causal)
    ref, ref_lse = _reference(torch, q, k, v, causal)
    torch.cuda.synchronize()
    # the fp32 output is unrounded: closer to the fp32 reference than its own bf16 rounding is
    assert (o32 - ref).norm() / ref.norm() < 0.01
    assert (o32 - ref).norm() <= (o32.bfloat16().float() - ref).norm()
    assert (lse - ref_lse).abs().max() < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_bf16_output_is_the_fp32_output_rounded(gpus, case):
    """The single step at W = 1 writes bf16 O (at D 128 from the same kernel, O's type taken per call; at D 32 and
    64 from the persistent one, the same tiles dealt another way): every element is the fp32 call's rounded to
    nearest even, bit for bit, the LSE the same, and nothing written past O's rows."""
    _need_gpu(gpus)
    import torch

    sq, sk, hq, hkv, d, causal = case
    torch.manual_seed(7 + sum(case))
    q = torch.randn(sq, hq, d, device="cuda").bfloat16()
    k, v = (torch.randn(sk, hkv, d, device="cuda").bfloat16() for _ in range(2))
    lib = _lib()
    o32, lse32 = _attend(torch, lib, q, k, v, causal)
    guard = torch.full((sq + 8, hq, d), 7.0, device="cuda", dtype=torch.bfloat16)  # 8 rows past O, watched
    lse = torch.full((hq, sq), float("nan"), device="cuda")
    assert lib.cuco_attn_block_bf16(q.data_ptr(), k.data_ptr(), v.data_ptr(), guard.data_ptr(), lse.data_ptr(), sq,
                                    sk, hq, hkv, d, sq, causal, torch.cuda.current_stream().cuda_stream) == 0
    torch.cuda.synchronize()
    assert torch.equal(guard[:sq].view(torch.int16), o32.bfloat16().view(torch.int16))
    assert torch.equal(lse, lse32)
    assert bool((guard[sq:] == 7.0).all())


@pytest.mark.gpu
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("causal", [0, 1])
def test_blocks_of_one_kv_tile_match_torch_every_time(gpus, d, causal):
    """A fused 1 MiB slice can be 128 key rows, one KV tile of the FMHA: such blocks, called again and again as a
    slice pipeline calls them (4096 query rows against the slice, or its 128 x 128 causal diagonal), write every
    row, finite, and match torch every time (the bench shapes' fused 1 MiB points found NaN rows at D = 32 and 64)."""
    _need_gpu(gpus)
    import torch

    lib = _lib()
    sq, hq = (128 if causal else 4096), 32
    torch.manual_seed(d + causal)
    q = torch.randn(sq, hq, d, device="cuda").bfloat16()
    k, v = (torch.randn(128, hq, d, device="cuda").bfloat16() for _ in range(2))
    ref, ref_lse = _reference(torch, q, k, v, causal)
    stream = torch.cuda.current_stream().cuda_stream
    wrong = []
    for i in range(40):
        o = torch.full((sq, hq, d), float("nan"), device="cuda")
        lse = torch.full((hq, sq), float("nan"), device="cuda")
        assert lib.cuco_attn_block_f32(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), sq,
                                       128, hq, hq, d, sq, causal, stream) == 0
        torch.cuda.synchronize()
        bad_rows = int((~torch.isfinite(o)).any(-1).sum()) + int((~torch.isfinite(lse)).sum())
        err = float((o - ref).norm() / ref.norm()) if bad_rows == 0 else float("nan")
        if bad_rows or err > 0.01 or float((lse - ref_lse).abs().max()) > 2e-3:
            wrong.append((i, bad_rows, err))
    assert not wrong, f"{len(wrong)} of 40 calls wrong (call, non-finite rows, rel l2): {wrong[:5]}"


@pytest.mark.gpu
def test_compute_library_runs_on_every_gpu_of_one_process(gpus):
    """One process, one call per GPU (the harness's thread mode): CUTLASS's example adapter raises the FMHA's
    shared-memory limit once per process, but the limit is per device; every GPU after the first refused the
    launch (status 4, the ring's `returned 104` at W >= 2)."""
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs, found {gpus}")
    import torch

    lib = _lib()
    sq, sk, hq, hkv, d, causal = CASES[0]
    for dev in range(gpus):
        with torch.cuda.device(dev):
            torch.manual_seed(dev)
            q = torch.randn(sq, hq, d, device="cuda").bfloat16()
            k, v = (torch.randn(sk, hkv, d, device="cuda").bfloat16() for _ in range(2))
            o, lse = _attend(torch, lib, q, k, v, causal)
            ref, _ = _reference(torch, q, k, v, causal)
            torch.cuda.synchronize()
            assert (o.float() - ref).norm() / ref.norm() < 0.01, f"GPU {dev}"


@pytest.mark.gpu
def test_merge_of_two_key_halves_is_full_attention(gpus):
    _need_gpu(gpus)
    import torch

    lib = _lib()
    torch.manual_seed(7)
    q = torch.randn(512, 8, 64, device="cuda").bfloat16()
    k, v = (torch.randn(1024, 2, 64, device="cuda").bfloat16() for _ in range(2))
    o, lse = _attend(torch, lib, q, k[:512].contiguous(), v[:512].contiguous(), 0)
    ob, lb = _attend(torch, lib, q, k[512:].contiguous(), v[512:].contiguous(), 0)
    assert lib.cuco_attn_merge_f32(o.data_ptr(), lse.data_ptr(), ob.data_ptr(), lb.data_ptr(), 512, 8, 64, 512,
                                   torch.cuda.current_stream().cuda_stream) == 0
    ref, ref_lse = _reference(torch, q, k, v, 0)
    torch.cuda.synchronize()
    assert (o - ref).norm() / ref.norm() < 0.01
    assert (o - ref).norm() <= (o.bfloat16().float() - ref).norm()
    assert (lse - ref_lse).abs().max() < 2e-3


WAITING_CALL = Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "fmha_arrival" / "waiting_call.py"


@pytest.mark.gpu
@pytest.mark.parametrize("d", [32, 64, 128])
def test_suffix_call_waits_for_its_keys_inside_the_kernel(gpus, d):
    """The gathered form's fused call (cuco_attn_suffix_wait_bf16), each case in a process of its own under a
    timeout (a waiting kernel that never sees its flags would hang): with its flags already up it is the plain call,
    bit for bit; launched while its keys are NaN and land late from another stream (zigzag, W = 2: each source's rows
    copied, then its flag raised, after ~10 ms), whether that stream's work was enqueued before or after the call, it
    is still the plain call over the landed keys; the same call given no flags reads NaN (the control: this test can
    fail)."""
    _need_gpu(gpus)
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(WAITING_CALL), "--d", str(d), "--timeout", "30", "--cases",
                          "flags_up,late_side_first,late_call_first,late_no_flags"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = {r["case"]: r for r in map(json.loads, out.stdout.strip().splitlines())}
    for case in ("flags_up", "late_side_first", "late_call_first"):
        assert got[case].get("rc") == 0 and got[case]["same"] and got[case]["finite"], (case, got[case])
    assert got["late_no_flags"].get("rc") == 0 and not got["late_no_flags"]["same"], got["late_no_flags"]


# ---- the workload through the harness -----------------------------------------------------------------------

@pytest.mark.gpu
def test_seed_fast_path_and_covering_points_verify(plugin, world):
    from cuco.fastpath.agent import FastPathAgent

    fast = FastPathAgent(llm=None, check_input=False, run_on_gpu=False,
                         include_dirs=workload_gpu.link(WL).include_dirs).run(WL.seed_code()).code
    points = [p for p in covering_points(WL.space(Topology(world=world, gin_available=False))) if p.backend == "lsa"]
    points += [Directives.from_label(label) for label in MORE_POINTS]
    labels = ["seed", "fast path", *(p.label() for p in points)]
    sos = _compile([WL.seed_code(), fast, *(WL.render(p) for p in points)])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world)
        failed = [(label, runs[so].status, runs[so].message) for label, so in zip(labels, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{shape}: {failed[:4]}"


@pytest.mark.gpu
def test_every_fixture_fails_under_delayed_arrival(plugin, world):
    made = {f.__name__: f() for f in (fixtures.skipped_step, fixtures.merge_without_lse, fixtures.never_waits,
                                      fixtures.gathered_never_waits, fixtures.gathered_fused_never_waits)}
    sos = _compile(list(made.values()))
    runs = _verify(plugin, sos, "verify-gqa-causal", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(made, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong
