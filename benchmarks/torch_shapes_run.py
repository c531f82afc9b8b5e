"""The frame of every torch anchor launched by torch.distributed.run: one process per GPU, NCCL with NVLink multicast
off, a row per shape measured by the anchor (a failure said in its row), rows printed as they come and written with
the device and versions to the output file by rank 0.

Each shape is measured `--repeats` times (default 3), interleaved round-robin over the shapes, so a clock or power
drift touches every shape alike (docs/measuring.md); a row's `*_ms` fields are the medians over its repeats, each
repeat's figures are kept in `repeats_ms`, and `spread` is the largest (max - min) / median among them."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
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
    ap.add_argument("--repeats", type=int, default=3, help="measurements of each shape, interleaved (default 3)")
    a = ap.parse_args()
    sys.path[:0] = [HERE, os.path.join(HERE, "..", "src")]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dev = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group("nccl", device_id=dev)
    names = a.shapes.split(",")
    repeats: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for r in range(max(1, a.repeats)):
        for name in names:
            if repeats[name] and "error" in repeats[name][-1]:
                continue  # a shape that failed once is not tried again
            try:
                row = measure(torch, dist, name, world, dev)
            except Exception as exc:  # a shape this W cannot split, or a failure: said in its row, the others still run
                row = {"shape": name, "world": world, "error": f"{type(exc).__name__}: {exc}"[:500]}
            repeats[name].append(row)
            if rank == 0:  # after every shape: a run cut off by its timeout keeps what it measured
                _write(a.out, torch, world, r + 1, [combine(repeats[n]) for n in names if repeats[n]])
        if rank == 0:
            print(json.dumps({"round": r + 1, "rows": [combine(repeats[n]) for n in names if repeats[n]]}),
                  flush=True)
    dist.destroy_process_group()


def _write(out: str, torch: Any, world: int, rounds: int, rows: list[dict[str, Any]]) -> None:
    from cuco.atomic import write_text  # src/ is on sys.path (run_over_shapes)

    write_text(Path(out), json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                      "nccl": ".".join(map(str, torch.cuda.nccl.version())), "world": world,
                                      "rounds": rounds, "rows": rows}, indent=2))


def combine(measured: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from a shape's repeats: the last repeat's fields, its `*_ms` numbers replaced by their medians over
    the repeats and its checks (booleans) by whether all repeats passed, with `repeats_ms` and `spread`; a repeat
    that failed makes the row that failure."""
    failed = [m for m in measured if "error" in m]
    if failed:
        return failed[-1]
    row = dict(measured[-1])
    for k, v in row.items():
        if isinstance(v, bool):  # a check holds for the row only if it held in every repeat
            row[k] = all(m.get(k) is True for m in measured)
    keys = [k for k, v in row.items() if k.endswith("_ms") and isinstance(v, (int, float))]
    series = {k: [m[k] for m in measured if isinstance(m.get(k), (int, float))] for k in keys}
    spreads = []
    for k, xs in series.items():
        row[k] = statistics.median(xs)
        if row[k] and len(xs) > 1:
            spreads.append((max(xs) - min(xs)) / row[k])
    row.update(repeats=len(measured), repeats_ms=series, spread=max(spreads) if spreads else None)
    return row
