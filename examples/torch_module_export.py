"""Search, then use the kernel found in a torch module's forward pass: a tensor-parallel layer computing
C = all_gather(x, dim 0) @ W with the best verified GEMM+AllGather candidate of a run.

    cuco run gemm_allgather --world 2 --shape 8192,8192,8192 --run-dir runs/ag
    torchrun --nproc-per-node 2 examples/torch_module_export.py runs/ag

On one GPU: `python examples/torch_module_export.py runs/ag --search` runs the search first (world 1, a small
shape) and sets up a one-rank job itself.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import torch
import torch.distributed as dist

from cuco.export import ExportedOp


class GatherLinear(torch.nn.Module):
    """y = all_gather(x) @ weight, through the exported op; x is this rank's rows."""

    def __init__(self, op: ExportedOp, weight: torch.Tensor):
        super().__init__()
        self.op = op
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.x_buffer = op.inputs()["A_local"]   # symmetric memory: the previous layer writes straight into it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.x_buffer.copy_(x)                    # stands in for a producer that writes into the buffer itself
        return self.op(self.x_buffer, self.weight).clone()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", help="a `cuco run gemm_allgather` directory with best/")
    ap.add_argument("--search", action="store_true", help="run the search into RUN_DIR first (one GPU, world 1)")
    ap.add_argument("--shape", default="2048,1024,1024", help="with --search: M,K,N")
    ap.add_argument("--evals", type=int, default=4, help="with --search: candidates to evaluate")
    args = ap.parse_args()
    if not torch.cuda.is_available():  # before a search that could not be used, and before torch's CUDA calls fail
        print("torch_module_export.py needs an NVIDIA GPU (torch sees none: a CPU build of torch, no GPU, or "
              "CUDA_VISIBLE_DEVICES hides them); run it on a GPU machine", file=sys.stderr)
        return 2
    if args.search:
        logging.basicConfig(level=logging.INFO, format="%(message)s")  # the run's messages (the "cuco" logger)
        from cuco.run import RunOptions, run_workload

        summary = run_workload(RunOptions("gemm_allgather", world=1, shape=args.shape, evaluations=args.evals,
                                          run_dir=args.run_dir, progress=False))
        print(summary.text())
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29541")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    with ExportedOp.open(args.run_dir, rank=rank, world=world, process_group=dist.group.WORLD) as op:
        M, K, N = op.source.shape.dims
        g = torch.Generator(device="cuda").manual_seed(1 + rank)
        layer = GatherLinear(op, torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=g))
        x = torch.randn(M // world, K, device="cuda", dtype=torch.bfloat16, generator=g)
        y = layer(x)
        x_cpu = x.cpu()                            # the reference gathers through the job's (gloo) group
        parts = [torch.empty_like(x_cpu) for _ in range(world)]
        dist.all_gather(parts, x_cpu)
        ref = torch.cat(parts).to(x.device).float() @ layer.weight.float()
        err = ((y.float() - ref).norm() / ref.norm()).item()
        print(f"rank {rank}: y {tuple(y.shape)}, relative error against torch {err:.2e} ({op.source.point or 'the fast path'})")
    dist.destroy_process_group()
    return 0 if err < 2e-2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
