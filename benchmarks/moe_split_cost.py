"""What MoE's overlap schedules pay for cutting the expert FFN by source, measured on one GPU.

    python benchmarks/moe_split_cost.py [--lib path/to/libmoe_compute.so] [--shapes paper-r1@2,...] [--out x.json]

Without --lib it builds (or finds cached) the MoE compute library of this tree (`bash benchmarks/gpu_w.sh 1
moe-split-cost`).

An overlapping schedule computes the rows a rank already holds while its peers' rows are still on the way, so its
grouped GEMM runs one group per (expert, source) instead of one per expert, and `stream_overlap` issues the own
rows and the peers' rows as two calls. This times, for the busiest rank (rank 0, the holder of expert 0) of a
named shape at world W, the same rows six ways in one process, interleaved rounds:

- `one`:    one group per local expert, every source's rows together (what `deferred` runs);
- `groups`: one group per (expert, source), one call;
- `calls`:  the own rows' groups in one call, then the peers' groups in a second (`stream_overlap`'s split);
- `one_in_order`, `groups_in_order`: `one` and `groups` from a plan whose up GEMM takes rows in order (every tile of
  a band of 128 rows before the next: what a GEMM that starts on the rows that have landed needs), not CUTLASS's
  grouped default (down the rows of one band of columns first);
- `arrival_landed`: `groups_in_order` through cuco_moe_ffn_run_arrival with every chunk flag already up: what the
  producer's arrival check costs when nothing has to wait.

If `calls` costs about what the overlap could hide, no schedule that splits this way can beat `deferred`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from cuco.workloads.moe import routing, shapes

#: (shape, world): the paper shapes at W = 2, one expert per rank at W = 4, and DeepSeek-V3's at W = 2.
DEFAULT = "paper-r1@2,paper-r3@2,paper-r5@2,paper4-r1@4,paper4-r3@4,dsv3-r3@2"
WAYS = ("one", "groups", "calls", "one_in_order", "groups_in_order", "arrival_landed")
CHUNK_ROWS = 256  # arrival_landed: rows per chunk flag


def rank0_layout(shape: str, world: int) -> dict[str, Any]:
    """Rank 0's rows by (local expert, source) for `shape` at `world`: every source routes the same slot counts
    (routing.slot_counts), so rank 0's expert e gets counts[e] rows from each of the W sources. Rows are expert-major
    (an expert's rows from every source adjacent, source by source), the same rows to the same expert in every
    way, the ways differing only in their groups, each (rows, expert, first row)."""
    t, h, i, e, k, r = shapes.parse(shape).dims
    if e % world:
        raise ValueError(f"{shape}: {e} experts do not split over {world} ranks")
    local = e // world
    counts = routing.slot_counts(t, e, k, r)[:local]  # rank 0 holds experts 0 .. local - 1
    one, groups, at = [], [], 0
    for x, c in enumerate(counts):
        one.append((world * c, x, at))
        groups += [(c, x, at + s * c) for s in range(world)]
        at += world * c
    own = [g for g in groups if (g[2] - one[g[1]][2]) == 0]  # source 0's rows of each expert: this rank's own
    peers = [g for g in groups if (g[2] - one[g[1]][2]) != 0]
    return {"shape": shape, "world": world, "T": t, "H": h, "I": i, "local_experts": local, "rows_per_source": counts,
            "rows": at, "one": one, "groups": groups, "own": own, "peers": peers}


def _time_layout(lib: Any, lay: dict[str, Any], rounds: int, iters: int, dev: Any) -> dict[str, Any]:
    import torch

    from event_timing import event_times_ms
    from moe_compute import Ffn

    n, hid, inter, local = lay["rows"], lay["H"], lay["I"], lay["local_experts"]
    x = (torch.rand(n, hid, device=dev) - 0.5).bfloat16()
    w1 = ((torch.rand(local, 2 * inter, hid, device=dev) - 0.5) / 16).bfloat16()
    w2 = ((torch.rand(local, hid, inter, device=dev) - 0.5) / 16).bfloat16()
    h1 = torch.empty(n, 2 * inter, device=dev, dtype=torch.bfloat16)
    act = torch.empty(n, inter, device=dev, dtype=torch.bfloat16)
    ys = {w: torch.empty(n, hid, device=dev, dtype=torch.bfloat16) for w in WAYS}
    ffn = Ffn(lib, len(lay["groups"]), hid, inter)
    ordered = Ffn(lib, len(lay["groups"]), hid, inter, rows_in_order=True)
    flags = torch.ones((n + CHUNK_ROWS - 1) // CHUNK_ROWS, device=dev, dtype=torch.int32)  # every chunk landed
    epoch = torch.ones(1, device=dev, dtype=torch.int32)

    def arrays(groups: list[tuple[int, int, int]]):
        return (torch.tensor([g[0] for g in groups], dtype=torch.int32, device=dev),
                torch.tensor([g[2] for g in groups], dtype=torch.int64, device=dev),
                torch.tensor([g[1] for g in groups], dtype=torch.int32, device=dev))

    one, grouped, own, peers = (arrays(lay[k]) for k in ("one", "groups", "own", "peers"))
    calls = {"one": lambda: ffn(x, w1, w2, h1, act, ys["one"], *one),
             "groups": lambda: ffn(x, w1, w2, h1, act, ys["groups"], *grouped),
             "calls": lambda: (ffn(x, w1, w2, h1, act, ys["calls"], *own),
                               ffn(x, w1, w2, h1, act, ys["calls"], *peers)),
             "one_in_order": lambda: ordered(x, w1, w2, h1, act, ys["one_in_order"], *one),
             "groups_in_order": lambda: ordered(x, w1, w2, h1, act, ys["groups_in_order"], *grouped),
             "arrival_landed": lambda: ordered.arrival(x, w1, w2, h1, act, ys["arrival_landed"], *grouped, flags, epoch,
                                                       CHUNK_ROWS)}
    for fn in calls.values():
        event_times_ms(fn, iters=1, warmup=3)
    per_round: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(rounds):
        for w, fn in calls.items():
            per_round[w].append(statistics.median(event_times_ms(fn, iters=iters, warmup=1)))
    torch.cuda.synchronize()
    # the same rows to the same experts: every way's output must be the one-group call's, element for element
    out: dict[str, Any] = {k: v for k, v in lay.items() if k not in ("one", "groups", "own", "peers")}
    for w in WAYS:
        out[f"{w}_ms"] = statistics.median(per_round[w])
        out[f"{w}_spread"] = (max(per_round[w]) - min(per_round[w])) / out[f"{w}_ms"]
    out["outputs_equal"] = all(bool(torch.equal(ys["one"], ys[w])) for w in WAYS)
    out["max_abs_diff"] = max(float((ys["one"].float() - ys[w].float()).abs().max()) for w in WAYS)
    for w in WAYS[1:]:
        out[f"{w}_over_one"] = out[f"{w}_ms"] / out["one_ms"]
    flop = 2.0 * n * hid * 3 * inter
    out["one_tflops"] = flop / out["one_ms"] / 1e9
    return out


def _library() -> Any:
    """This tree's MoE compute library, built here once (cached by sources and toolchain)."""
    from cuco import workloads
    from cuco.kit.compute import build_compute
    from cuco.toolchain import default_toolchain

    return build_compute(workloads.get("moe"), default_toolchain()).library


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="the MoE compute library (libmoe_compute.so); default: this tree's, built here")
    ap.add_argument("--shapes", default=DEFAULT, help="NAME@W, comma-separated")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    pairs = []
    for item in (s for s in a.shapes.split(",") if s):
        name, _, w = item.partition("@")
        if not w.isdigit():
            ap.error(f"{item!r}: give each shape as NAME@W, e.g. paper-r1@2")
        pairs.append(rank0_layout(name, int(w)))  # bad names fail here, before the GPU is touched
    import torch

    from moe_compute import load

    dev = torch.device("cuda")
    lib = load(a.lib or str(_library()))
    res: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "config": lib.cuco_moe_ffn_config().decode(), "rounds": a.rounds, "iters": a.iters,
                           "rows": []}
    for lay in pairs:
        row = _time_layout(lib, lay, a.rounds, a.iters, dev)
        res["rows"].append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if all(r["outputs_equal"] for r in res["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
