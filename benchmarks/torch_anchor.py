"""Torch anchors for GEMM+AllGather: host all_gather->matmul and torch's fused_all_gather_matmul.

Launch one process per GPU:  python -m torch.distributed.run --nproc_per_node 2 benchmarks/torch_anchor.py OUT.json
Times are medians of CUDA-event timings (warm-up first), max over ranks, in milliseconds; each shape is measured
`--repeats` times (default 3), interleaved over the shapes, and its row holds the medians with their `spread`
(torch_shapes_run.combine).
"""

from __future__ import annotations

import json
import os
import sys

SHAPES = [(8192, 8192, 8192), (16384, 8192, 3584), (4096, 4096, 4096), (32768, 8192, 8192), (12288, 5120, 5120),
          (2048, 8192, 28672), (8192, 4096, 28672), (4096, 7168, 18432)]


def _median_ms(torch, dist, fn, iters: int = 30, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    local = torch.tensor([times[len(times) // 2]], device="cuda")
    dist.all_reduce(local, op=dist.ReduceOp.MAX)
    return float(local.item())


def main(out_path: str, shapes: list[tuple[int, int, int]] = SHAPES, repeats: int = 3) -> None:
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    group = dist.group.WORLD
    symm_mem.enable_symm_mem_for_group(group.group_name)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_shapes_run import combine

    shapes = [s for s in shapes if s[0] % world == 0]
    measured: dict[tuple[int, int, int], list[dict]] = {s: [] for s in shapes}
    for _round in range(max(1, repeats)):
        for shape in shapes:
            measured[shape].append(_measure(torch, dist, group, symm_mem, shape, world))
            if rank == 0:
                print(json.dumps(measured[shape][-1]), flush=True)
    rows = [combine(measured[s]) for s in shapes]
    if rank == 0:
        meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "nccl": ".".join(map(str, torch.cuda.nccl.version())), "repeats": repeats, "rows": rows}
        with open(out_path, "w") as f:
            json.dump(meta, f, indent=2)
    dist.destroy_process_group()


def _measure(torch, dist, group, symm_mem, shape: tuple[int, int, int], world: int) -> dict:
    """One measurement of host all_gather->matmul and torch's fused op at `shape` (M, K, N)."""
    m, k, n = shape
    a = torch.randn(m // world, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    full = torch.empty(m, k, device="cuda", dtype=torch.bfloat16)

    def host():
        dist.all_gather_into_tensor(full, a)
        return full @ b

    def fused():
        return torch.ops.symm_mem.fused_all_gather_matmul(a, [b], gather_dim=0, group_name=group.group_name)

    ref = host()
    _, outs = fused()
    ok = bool(torch.allclose(outs[0].float(), ref.float(), atol=1e-1, rtol=1e-2))
    return {"M": m, "K": k, "N": n, "world": world, "torch_host_ms": _median_ms(torch, dist, host),
            "torch_fused_ms": _median_ms(torch, dist, fused), "torch_fused_matches_host": ok}


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="torch_anchor.json")
    ap.add_argument("--shapes", default=";".join(",".join(map(str, s)) for s in SHAPES), help="';'-separated M,K,N")
    ap.add_argument("--repeats", type=int, default=3, help="measurements of each shape, interleaved (default 3)")
    a = ap.parse_args()
    main(a.out, [tuple(int(x) for x in s.split(",")) for s in a.shapes.split(";") if s], a.repeats)
