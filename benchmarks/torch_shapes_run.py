"""The frame of every torch anchor launched by torch.distributed.run: one process per GPU, NCCL with NVLink multicast
off, a row per shape measured by the anchor (a failure said in its row), rows printed as they come and written with
the device and versions to the output file by rank 0."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))


def run_over_shapes(description: str, default_shapes: str,
                    measure: Callable[[Any, Any, str, int, Any], dict[str, Any]]) -> None:
    """Parse `OUT.json [--shapes a,b]`, then `measure(torch, dist, name, world, device)` -> row for each shape."""
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    import torch
    import torch.distributed as dist

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("out")
    ap.add_argument("--shapes", default=default_shapes)
    a = ap.parse_args()
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "src")]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", device_id=dev)
    rows = []
    for name in a.shapes.split(","):
        try:
            row = measure(torch, dist, name, world, dev)
        except Exception as exc:  # a shape this W cannot split, or a failure: said in its row, the others still run
            row = {"shape": name, "world": world, "error": f"{type(exc).__name__}: {exc}"[:500]}
        rows.append(row)
        if rank == 0:  # after every shape: a run cut off by its timeout keeps the shapes it measured
            print(json.dumps(row), flush=True)
            tmp = a.out + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "nccl": ".".join(map(str, torch.cuda.nccl.version())), "world": world, "rows": rows}, f,
                          indent=2)
            os.replace(tmp, a.out)
    dist.destroy_process_group()
