"""Device-initiated reductions against NCCL's, same process model, same timing code: the program
benchmarks/probes/reductions/allreduce_sweep.cu (NCCL AllReduce, ReduceScatter and Reduce, bf16 sum, 1 MiB to
1 GiB) is built as written and as cuco's fast path rewrites it, and the two binaries run alternately. Bus bandwidth
as nccl-tests defines it (AllReduce: algbw x 2(W-1)/W; ReduceScatter: x (W-1)/W; Reduce: x 1), NVLink multicast
off. Writes the rows to --out (JSON) and a table beside it (.md).

    PYTHONPATH=src python3 benchmarks/reductions_vs_nccl.py --world 2 --out benchmarks/results/reductions_w2.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "probes" / "reductions" / "allreduce_sweep.cu"
BUS = {"allreduce": lambda w: 2 * (w - 1) / w, "reducescatter": lambda w: (w - 1) / w, "reduce": lambda w: 1.0}


def parse(out: str) -> tuple[dict[tuple[str, int], float], dict[str, int]]:
    """({(collective, bytes): ms}, {collective: wrong elements}) from the program's lines."""
    times, wrong = {}, {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "time":
            times[(parts[1], int(parts[2]))] = float(parts[3])
        elif len(parts) == 3 and parts[0] == "wrong":
            wrong[parts[1]] = int(parts[2])
    return times, wrong


def rows(world: int, nccl: list[dict], cuco: list[dict]) -> list[dict[str, Any]]:
    """One row per (collective, bytes): each side's median over its runs, bus bandwidths and their ratio."""
    out = []
    for key in sorted(nccl[0][0], key=lambda k: (list(BUS).index(k[0]), k[1])):
        coll, nbytes = key
        n_ms = statistics.median(r[0][key] for r in nccl if key in r[0])
        c_runs = [r[0][key] for r in cuco if key in r[0]]
        row: dict[str, Any] = {"collective": coll, "bytes": nbytes, "world": world, "nccl_ms": n_ms,
                               "nccl_busbw_gbps": nbytes / n_ms / 1e6 * BUS[coll](world)}
        if c_runs:
            c_ms = statistics.median(c_runs)
            row.update(cuco_ms=c_ms, cuco_busbw_gbps=nbytes / c_ms / 1e6 * BUS[coll](world), ratio=n_ms / c_ms,
                       runs_nccl_ms=[r[0][key] for r in nccl if key in r[0]], runs_cuco_ms=c_runs)
            both = row["runs_nccl_ms"] + c_runs
            row["spread"] = max((max(xs) - min(xs)) / statistics.median(xs) for xs in (row["runs_nccl_ms"], c_runs)) \
                if len(both) > 2 else None
        out.append(row)
    return out


def markdown(meta: dict[str, Any], table: list[dict[str, Any]]) -> str:
    """The table as nccl-tests readers expect it: size, time and bus bandwidth per side, ratio."""
    lines = [f"# Device-initiated reductions vs NCCL, W = {meta['world']}", "",
             f"{meta['device']}; NCCL {meta['nccl']}; {meta['date']}; NVLink multicast off. bf16 sum, out of place; "
             "bus bandwidth as nccl-tests defines it; each side the median of its runs (each run: the median of 3 "
             "repeats of 20 back-to-back calls). Ratio = NCCL time / cuco time (> 1: cuco faster).", "",
             f"Correctness at 1 GiB (elements wrong): NCCL {meta['wrong_nccl']}, cuco {meta['wrong_cuco']}.", "",
             "| collective | size | NCCL µs | NCCL busbw GB/s | cuco µs | cuco busbw GB/s | ratio |", "|---|---|---|---|---|---|---|"]
    for r in table:
        size = f"{r['bytes'] >> 20} MiB" if r["bytes"] < 1 << 30 else f"{r['bytes'] >> 30} GiB"
        cu = (f"{r['cuco_ms'] * 1e3:.1f} | {r['cuco_busbw_gbps']:.1f} | {r['ratio']:.3f}" if "cuco_ms" in r
              else "- | - | -")
        lines.append(f"| {r['collective']} | {size} | {r['nccl_ms'] * 1e3:.1f} | {r['nccl_busbw_gbps']:.1f} | {cu} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2, help="runs of each binary, alternating (default 2)")
    ap.add_argument("--timeout-s", type=float, default=240)
    ap.add_argument("--out", default="reductions.json")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parent / "src"))
    from cuco.fastpath import verify
    from cuco.fastpath.analyze import analyze
    from cuco.fastpath.transform import transform

    text = PROGRAM.read_text()
    rewrite = transform(analyze(text, PROGRAM.name), text)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cuco-reductions"
    binaries = {}
    for side, code in (("nccl", text), ("cuco", rewrite.code)):
        built = verify.build(code, workdir=work / side, include_dirs=[PROGRAM.parent], name="sweep")
        if not built.ok:
            print(f"{side} build failed:\n{built.log[-3000:]}", file=sys.stderr)
            return 1
        binaries[side] = built.binary
    env = {**os.environ, "WORLD_SIZE": str(args.world), "NCCL_NVLS_ENABLE": "0"}
    results: dict[str, list] = {"nccl": [], "cuco": []}
    for _run in range(args.runs):
        for side in ("nccl", "cuco"):
            p = subprocess.run([str(binaries[side])], env=env, capture_output=True, text=True, timeout=args.timeout_s)
            print(f"# {side}: exit {p.returncode}\n{p.stdout}{p.stderr[-2000:]}", flush=True)
            results[side].append(parse(p.stdout))
    import torch

    meta = {"world": args.world, "device": torch.cuda.get_device_name(0),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "rules": list(rewrite.rules_applied),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "wrong_nccl": [r[1] for r in results["nccl"]], "wrong_cuco": [r[1] for r in results["cuco"]]}
    if not results["nccl"] or not results["nccl"][0][0]:
        print("the NCCL program printed no times", file=sys.stderr)
        return 1
    table = rows(args.world, results["nccl"], results["cuco"])
    Path(args.out).write_text(json.dumps({**meta, "rows": table}, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(meta, table))
    print(markdown(meta, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
