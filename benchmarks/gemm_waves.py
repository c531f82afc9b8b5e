"""GEMM+AllGather's persistent GEMM on fewer SMs than the GPU has, on one GPU: what the SMs the `fused` placement
gives its pull kernel cost the GEMM, against the waves of work tiles its persistent grid runs.

    python benchmarks/gemm_waves.py [--lib path/to/libgemm_allgather_compute.so] [--shapes M,K,N;...] \
        [--comm 0,2,4,8,16] [--configs pingpong,coop] [--swizzles 1,2,4,8] [--json out.json]

The `fused` point runs ONE persistent GEMM (`cuco_ag_gemm_persistent`, clusters
of 2 CTAs) on sm_count - comm_ctas SMs while its pull kernel holds the rest (comm_ctas: 8 to 16 at W >= 2,
`common_block.py`). A persistent grid of G CTAs runs T work tiles in ceil(T / G) waves, so giving SMs away costs
the GEMM either nothing (the same waves) or a whole wave. This times the GEMM alone (no flags: nothing waits, no
communication) at each SM count, in interleaved rounds of spin-held calls, beside cuBLAS (torch.matmul) on every
SM, and checks its output against torch's. Each of the library's two configurations (`pingpong`: 128x128 tiles;
`coop`: cooperative 128x256) runs at every swizzle asked for, every count of SMs given away; and `tuned`, the
configuration and swizzle `cuco_ag_gemm_tune` measured fastest at that SM count (a library call; the fused point
keeps its fixed ping-pong choice), against the best of that grid.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from typing import Any

SHAPES = ("8192,8192,8192", "16384,8192,3584", "4096,4096,4096", "32768,8192,8192", "12288,5120,5120",
          "2048,8192,28672", "8192,4096,28672", "4096,7168,18432")
#: cuco_ag_gemm_config (ag_gemm.h) and each configuration's tile columns; pingpong is the fused point's kGemmConfig
CONFIGS = {"coop": (0, 256), "pingpong": (1, 128)}
TUNED = -1   # CUCO_AG_TUNED: what cuco_ag_gemm_tune chose
TILE, CLUSTER_M = 128, 2
HOLD_CYCLES = 2_000_000


class Args(ctypes.Structure):
    """cuco_ag_gemm_args (ag_gemm.h)."""
    _fields_ = [("A", ctypes.c_void_p), ("B", ctypes.c_void_p), ("C", ctypes.c_void_p),
                *((n, ctypes.c_int64) for n in ("M", "N", "K", "lda", "ldb", "ldc", "local_row_begin",
                                                "local_row_end")),
                ("order", ctypes.c_int), ("flags", ctypes.c_void_p), ("epoch", ctypes.c_uint32),
                ("epoch_at", ctypes.c_void_p), ("rows_per_rank", ctypes.c_int64), ("chunk_rows", ctypes.c_int64),
                ("chunks_per_rank", ctypes.c_int), ("sm_count", ctypes.c_int), ("config", ctypes.c_int),
                ("swizzle", ctypes.c_int)]


def parse_shape(text: str) -> tuple[int, int, int]:
    """M,K,N as the GEMM+AllGather benchmarks name them; each a positive multiple of 128."""
    try:
        m, k, n = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is M,K,N, e.g. 8192,8192,8192") from None
    if min(m, k, n) <= 0 or m % TILE or n % TILE or k % 64:
        raise argparse.ArgumentTypeError(f"{text!r}: M and N must be positive multiples of 128, K of 64")
    return m, k, n


def cluster_tiles(m: int, n: int, tile_n: int = TILE) -> int:
    """The persistent scheduler's units: clusters of 2 row tiles of 128 rows by one tile_n-column tile."""
    return -(-m // (TILE * CLUSTER_M)) * -(-n // tile_n)


def waves(m: int, n: int, ctas: int, tile_n: int = TILE) -> int:
    """Waves of the GEMM's cluster tiles on `ctas` CTAs (ctas // 2 clusters)."""
    return -(-cluster_tiles(m, n, tile_n) // max(1, ctas // CLUSTER_M))


def load_library(path: str | None) -> ctypes.CDLL:
    """The GEMM+AllGather compute library at `path`, or built (or found cached) from this tree."""
    if path is None:
        from cuco import workloads
        from cuco.kit.compute import build_compute
        from cuco.toolchain import default_toolchain

        path = str(build_compute(workloads.get("gemm_allgather"), default_toolchain()).library)
    lib = ctypes.CDLL(path)
    lib.cuco_ag_gemm_persistent.argtypes = [ctypes.POINTER(Args), ctypes.c_void_p]
    lib.cuco_ag_gemm_tune.argtypes = [ctypes.POINTER(Args), ctypes.c_int, ctypes.c_void_p,
                                      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
    return lib


def measure(lib: ctypes.CDLL, shape: tuple[int, int, int], comm: list[int], configs: list[str], swizzles: list[int],
            rounds: int, iters: int) -> dict[str, Any]:
    """The persistent GEMM in each configuration and swizzle at sm_count - c SMs for each c in `comm`, and
    torch.matmul, on one shape."""
    import torch

    from event_timing import event_times_ms

    m, k, n = shape
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(11)
    a = torch.randn(m, k, device=dev, generator=gen).bfloat16()
    b = torch.randn(k, n, device=dev, generator=gen).bfloat16()
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    # ("tuned", cap, c): CUCO_AG_TUNED after cuco_ag_gemm_tune at swizzles up to the largest asked for, as the
    # fused point runs it
    cap = max(swizzles)
    variants = [(cfg, sw, c) for cfg in configs for sw in swizzles for c in comm] + [("tuned", cap, c) for c in comm]
    outs = {v: torch.empty(m, n, device=dev, dtype=torch.bfloat16) for v in variants}
    args = {v: Args(a.data_ptr(), b.data_ptr(), outs[v].data_ptr(), m, n, k, k, n, n, 0, m, 0, None, 0, None, m, m,
                    1, (sms - v[2]) & ~1, CONFIGS[v[0]][0] if v[0] in CONFIGS else TUNED, v[1]) for v in variants}
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)   # noqa: E731
    chosen = {}
    for v in variants:
        if v[0] == "tuned":
            cfg, sw = ctypes.c_int(), ctypes.c_int()
            rc = lib.cuco_ag_gemm_tune(ctypes.byref(args[v]), cap, stream(), ctypes.byref(cfg), ctypes.byref(sw))
            if rc:
                raise RuntimeError(f"cuco_ag_gemm_tune {v}: status {rc}")
            chosen[v] = (next(n for n, (c, _t) in CONFIGS.items() if c == cfg.value), sw.value)

    def gemm(v: tuple[str, int, int]) -> None:
        rc = lib.cuco_ag_gemm_persistent(ctypes.byref(args[v]), stream())
        if rc:
            raise RuntimeError(f"cuco_ag_gemm_persistent {v}: status {rc}")

    fns = {**{v: (lambda v=v: gemm(v)) for v in variants}, "cublas": lambda: torch.matmul(a, b)}
    want = torch.matmul(a, b).float()
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    scale = want.abs().max().item()
    err = max((outs[v].float() - want).abs().max().item() / scale for v in variants)
    times: dict[Any, list[float]] = {name: [] for name in fns}
    for r in range(rounds):   # interleaved, the order turned each round
        for name in (list(times) if r % 2 == 0 else list(times)[::-1]):
            times[name].append(statistics.median(event_times_ms(fns[name], iters, 3,
                                                                before=lambda: torch.cuda._sleep(HOLD_CYCLES))))
    med = {name: statistics.median(t) for name, t in times.items()}
    rows = []
    for v in variants:
        cfg, sw = chosen.get(v, v[:2])
        row = {"config": v[0], "swizzle": v[1], "comm_sms": v[2], "ctas": args[v].sm_count,
               "waves": waves(m, n, args[v].sm_count, CONFIGS[cfg][1]), "ms": med[v],
               "over_cublas": med[v] / med["cublas"], "spread": (max(times[v]) - min(times[v])) / med[v]}
        if v in chosen:
            best = min(med[u] for u in variants if u[2] == v[2] and u not in chosen)
            row.update({"chosen_config": cfg, "chosen_swizzle": sw, "over_best_of_grid": med[v] / best})
        rows.append(row)
    return {"shape": f"{m},{k},{n}", "sm_count": sms, "cublas_ms": med["cublas"],
            "cublas_spread": (max(times["cublas"]) - min(times["cublas"])) / med["cublas"], "max_rel_err": err,
            "variants": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=None)
    ap.add_argument("--shapes", type=lambda t: [parse_shape(s) for s in t.split(";")],
                    default=[parse_shape(s) for s in SHAPES])
    ap.add_argument("--comm", type=lambda t: [int(x) for x in t.split(",")], default=[0, 4, 8, 16],
                    help="SMs given away (0: every SM)")
    ap.add_argument("--configs", type=lambda t: t.split(","), default=["pingpong", "coop"])
    ap.add_argument("--swizzles", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 4, 8])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if any(c < 0 for c in a.comm):
        ap.error("--comm: SM counts given away are >= 0")
    if set(a.configs) - set(CONFIGS):
        ap.error(f"--configs: each one of {', '.join(CONFIGS)}")
    if set(a.swizzles) - {1, 2, 4, 8}:
        ap.error("--swizzles: each one of 1, 2, 4, 8")
    from probe_rows import collect

    lib = load_library(a.lib)
    collect((measure(lib, shape, a.comm, a.configs, a.swizzles, a.rounds, a.iters) for shape in a.shapes), a.json)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    raise SystemExit(main())
