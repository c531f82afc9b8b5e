"""The exported op inside a multi-process torch job (W >= 2): the best GEMM+AllGather candidate of a run opened
on every rank, checked against torch (all_gather + matmul), captured once into a CUDA graph and replayed on fresh
inputs, each replay checked, timed per call (eager and replayed) against the harness's time for the same candidate,
and called under torch.compile (inductor) with its output unused, calls counted.

    cuco run gemm_allgather --world 2 --shape 8192,8192,8192 --evals 4 --run-dir /tmp/ag2
    torchrun --standalone --nproc-per-node 2 benchmarks/export_w2.py /tmp/ag2 --out export_w2.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
from pathlib import Path
from typing import Any

from event_timing import event_times_ms


class CountingOp:
    """The exported op with its calls counted (what reaches the op under torch.compile)."""

    def __init__(self, op: Any):
        self.op, self.calls = op, 0
        self._buffers, self.output_names = op._buffers, op.output_names

    def __call__(self, *inputs: Any) -> Any:
        self.calls += 1
        return self.op(*inputs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--replays", type=int, default=100)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default="export_w2.json")
    args = ap.parse_args()
    import torch
    import torch._inductor.config as inductor_config
    import torch.distributed as dist

    from cuco.export import ExportedOp, as_torch_op

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    tiny = torch.zeros(1, device="cuda")

    def slowest_median(fn) -> float:
        """Median ms of `iters` calls, each entered by every rank together (a device-side rendezvous just before
        its start event, outside the timed span), the slowest rank's."""
        times = event_times_ms(fn, args.iters, 5, before=lambda: dist.all_reduce(tiny))
        ms = statistics.median(times)
        t = torch.tensor([ms], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    row: dict[str, Any] = {"world": world, "run_dir": args.run_dir, "device": torch.cuda.get_device_name(),
                           "torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    with ExportedOp.open(args.run_dir, rank=rank, world=world, process_group=dist.group.WORLD) as op:
        M, K, N = op.source.shape.dims
        row.update(shape=f"{M},{K},{N}", candidate=op.source.candidate_id, point=op.source.point,
                   harness_ms=op.source.harness_ms, graph_safe=op.graph_safe)
        bufs = op.inputs()
        g = torch.Generator(device="cuda").manual_seed(1000 + rank)
        same_b = torch.Generator(device="cuda").manual_seed(7)   # B is the same on every rank
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16, generator=same_b)
        bufs["B"].copy_(b)
        full = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)

        def error(out: torch.Tensor) -> float:
            dist.all_gather_into_tensor(full, bufs["A_local"])  # after the op in stream order: every rank is done
            ref = full.float() @ b.float()
            return ((out.float() - ref).norm() / ref.norm()).item()

        bufs["A_local"].normal_(generator=g)
        row["eager_rel_l2"] = error(op(bufs["A_local"], bufs["B"]).clone())
        row["eager_ms"] = slowest_median(lambda: op(bufs["A_local"], bufs["B"]))

        graph, out = op.capture(bufs["A_local"], bufs["B"])
        errors = []
        for _ in range(args.replays):
            bufs["A_local"].normal_(generator=g)
            graph.replay()
            errors.append(error(out))
        bad = sum(e >= 2e-2 for e in errors)
        t = torch.tensor([bad], device="cuda")
        dist.all_reduce(t)
        row.update(graph_replays=args.replays, graph_failed_replays_all_ranks=int(t.item()),
                   graph_max_rel_l2=max(errors), graph_ms=slowest_median(graph.replay))

        counting = CountingOp(op)
        f = as_torch_op(counting)

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            f(x, y)  # its output unused: the call is kept for its effect (the other ranks wait for it)
            return y * 2

        torch._dynamo.reset()
        with inductor_config.patch(force_disable_caches=True):
            compiled = torch.compile(step, backend="inductor", fullgraph=True)
            for _ in range(3):
                compiled(bufs["A_local"], bufs["B"])
        torch.cuda.synchronize()
        row.update(inductor_calls=counting.calls, inductor_calls_expected=3)
    if row.get("harness_ms"):
        row["eager_over_harness"] = row["eager_ms"] / row["harness_ms"]
        row["graph_over_harness"] = row["graph_ms"] / row["harness_ms"]
    row["spread"] = None
    row["spread_note"] = "median of event-timed calls, slowest rank; one process per rank, one run"
    if rank == 0:
        Path(args.out).write_text(json.dumps(row, indent=1))
        print(json.dumps(row, indent=1))
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
