"""Correctness and speed of the MoE compute library (CUTLASS grouped GEMM FFN) against torch's grouped GEMM.

    python benchmarks/moe_compute.py --lib path/to/libcuco_moe_ffn.so [--out results.json]

Checks the FFN against an fp32 torch reference on small groups (zero-row groups included), then times the
paper shape (2 experts, 3:1) and the DeepSeek-V3 shape (256 experts, top-8) against torch._grouped_mm with the
same SwiGLU between the GEMMs, medians of CUDA-event timings in one process.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys

import torch

from cuco.workloads.moe.routing import slot_counts
from event_timing import event_times_ms


def load(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    lib.cuco_moe_ffn_create.argtypes = [ctypes.POINTER(vp), ctypes.c_int, i64, i64, ctypes.c_int]
    lib.cuco_moe_ffn_create_ex.argtypes = [ctypes.POINTER(vp), ctypes.c_int, i64, i64] + [ctypes.c_int] * 3
    lib.cuco_moe_ffn_run.argtypes = [vp, ctypes.c_int] + [vp] * 10
    lib.cuco_moe_ffn_run_arrival.argtypes = [vp, ctypes.c_int] + [vp] * 12 + [i64, vp]
    lib.cuco_moe_ffn_destroy.argtypes = [vp]
    lib.cuco_moe_ffn_config.restype = ctypes.c_char_p
    return lib


class Ffn:
    """One plan of the compute library over torch tensors."""

    def __init__(self, lib: ctypes.CDLL, groups: int, hidden: int, inter: int, sm_count: int = 0,
                 rows_in_order: bool = False):
        self.lib, self.plan = lib, ctypes.c_void_p()
        rc = lib.cuco_moe_ffn_create_ex(ctypes.byref(self.plan), groups, hidden, inter, sm_count, sm_count,
                                        int(rows_in_order))
        if rc:
            raise RuntimeError(f"cuco_moe_ffn_create_ex returned {rc}")

    def __call__(self, x, w1, w2, h1, act, y, rows, offs, experts) -> None:
        p = lambda t: ctypes.c_void_p(t.data_ptr())
        rc = self.lib.cuco_moe_ffn_run(self.plan, rows.numel(), p(x), p(w1), p(w2), p(h1), p(act), p(y), p(rows),
                                       p(offs), p(experts), ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
        if rc:
            raise RuntimeError(f"cuco_moe_ffn_run returned {rc}")

    def arrival(self, x, w1, w2, h1, act, y, rows, offs, experts, flags, epoch, chunk_rows: int, stream=None) -> None:
        """cuco_moe_ffn_run_arrival: the up GEMM waits for each chunk of x's rows (flags, epoch: uint32 tensors
        viewed as int32; flags None: nothing awaited) on `stream` (default: the current one)."""
        p = lambda t: ctypes.c_void_p(t.data_ptr() if t is not None else 0)
        s = (stream or torch.cuda.current_stream()).cuda_stream
        rc = self.lib.cuco_moe_ffn_run_arrival(self.plan, rows.numel(), p(x), p(w1), p(w2), p(h1), p(act), p(y), None,
                                               p(rows), p(offs), p(experts), p(flags), p(epoch), chunk_rows,
                                               ctypes.c_void_p(s))
        if rc:
            raise RuntimeError(f"cuco_moe_ffn_run_arrival returned {rc}")


def swiglu(h: torch.Tensor) -> torch.Tensor:
    g, u = h.chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


def reference(x, w1, w2, counts, experts):
    out, start = torch.empty_like(x, dtype=torch.float32), 0
    for c, e in zip(counts, experts):
        xs = x[start:start + c].float()
        out[start:start + c] = swiglu(xs @ w1[e].float().T) @ w2[e].float().T
        start += c
    return out


def groups_for(counts: list[int], dev):
    offs = [0]
    for c in counts[:-1]:
        offs.append(offs[-1] + c)
    return (torch.tensor(counts, dtype=torch.int32, device=dev), torch.tensor(offs, dtype=torch.int64, device=dev))


def check(lib, counts, hidden, inter, dev) -> dict:
    n, e = sum(counts), len(counts)
    g = torch.Generator(device=dev).manual_seed(len(counts) * 7 + hidden)
    x = torch.randn(n, hidden, device=dev, generator=g).bfloat16()
    w1 = (torch.randn(e, 2 * inter, hidden, device=dev, generator=g) / hidden ** 0.5).bfloat16()
    w2 = (torch.randn(e, hidden, inter, device=dev, generator=g) / inter ** 0.5).bfloat16()
    h1 = torch.full((n, 2 * inter), float("nan"), device=dev, dtype=torch.bfloat16)
    act = torch.full((n, inter), float("nan"), device=dev, dtype=torch.bfloat16)
    y = torch.full((n, hidden), float("nan"), device=dev, dtype=torch.bfloat16)
    rows, offs = groups_for(counts, dev)
    ex = torch.arange(e, dtype=torch.int32, device=dev).flip(0)   # groups need not be in expert order
    Ffn(lib, e + 3, hidden, inter)(x, w1, w2, h1, act, y, rows, offs, ex)
    torch.cuda.synchronize()
    ref = reference(x, w1, w2, counts, ex.tolist())
    rel = ((y.float() - ref).norm() / ref.norm()).item() if n else 0.0
    return {"counts": counts, "H": hidden, "I": inter, "rel_l2": rel, "nan": int(torch.isnan(y).sum()),
            "passed": rel < 1e-2 and not torch.isnan(y).any().item()}


def time_ms(fn, iters=20, warmup=5) -> tuple[float, float]:
    ts = event_times_ms(fn, iters, warmup)
    return statistics.median(ts), (max(ts) - min(ts))


def torch_ffn(x, w1t, w2t, ends):
    h = torch._grouped_mm(x, w1t, offs=ends)
    return torch._grouped_mm(swiglu(h), w2t, offs=ends)


def speed(lib, counts, hidden, inter, dev) -> dict:
    n, e = sum(counts), len(counts)
    x = (torch.rand(n, hidden, device=dev) - 0.5).bfloat16()
    w1 = ((torch.rand(e, 2 * inter, hidden, device=dev) - 0.5) / 16).bfloat16()
    w2 = ((torch.rand(e, hidden, inter, device=dev) - 0.5) / 16).bfloat16()
    h1 = torch.empty(n, 2 * inter, device=dev, dtype=torch.bfloat16)
    act = torch.empty(n, inter, device=dev, dtype=torch.bfloat16)
    y = torch.empty(n, hidden, device=dev, dtype=torch.bfloat16)
    rows, offs = groups_for(counts, dev)
    ex = torch.arange(e, dtype=torch.int32, device=dev)
    ffn = Ffn(lib, e, hidden, inter)
    ours, ours_spread = time_ms(lambda: ffn(x, w1, w2, h1, act, y, rows, offs, ex))
    ends = torch.cumsum(torch.tensor(counts, device=dev), 0).to(torch.int32)
    w1t, w2t = w1.transpose(1, 2), w2.transpose(1, 2)
    anchor, anchor_spread = time_ms(lambda: torch_ffn(x, w1t, w2t, ends))
    ref = torch_ffn(x, w1t, w2t, ends).float()
    rel = ((y.float() - ref).norm() / ref.norm()).item()
    flop = 2.0 * n * hidden * 3 * inter
    return {"experts": e, "tokens": n, "compute_ms": ours, "compute_spread_ms": ours_spread,
            "anchor_compute_ms": anchor, "anchor_spread_ms": anchor_spread, "tflops": flop / ours / 1e9,
            "anchor_tflops": flop / anchor / 1e9, "anchor_over_compute": anchor / ours, "rel_l2_vs_torch": rel}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    dev = torch.device("cuda")
    lib = load(a.lib)
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "config": lib.cuco_moe_ffn_config().decode(), "checks": [], "speed": []}
    for counts, h, i in [([5, 0, 130, 257], 256, 128), ([0, 0], 128, 64), ([1, 128, 129, 3], 512, 256)]:
        res["checks"].append(check(lib, counts, h, i, dev))
        print(res["checks"][-1], flush=True)
    for label, counts in [("paper 3:1", [3072, 1024]), ("paper 5:1", [3413, 683]),
                          ("dsv3 uniform", [128] * 256), ("dsv3 3:1", slot_counts(4096, 256, 8, 3))]:
        r = {"shape": label, **speed(lib, counts, 7168, 2048, dev)}
        res["speed"].append(r)
        print(r, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)
    return 0 if all(c["passed"] for c in res["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
