"""Device-initiated reductions against NCCL's, same process model, same timing code: the program
benchmarks/probes/reductions/allreduce_sweep.cu (NCCL AllReduce, ReduceScatter and Reduce, bf16 sum, 64 KiB to
1 GiB) is built as written and as cuco's fast path rewrites it, and the two binaries run alternately. Bus bandwidth
as nccl-tests defines it (AllReduce: algbw x 2(W-1)/W; ReduceScatter: x (W-1)/W; Reduce: x 1), NVLink multicast
off. Writes the rows to --out (JSON) and a table beside it (.md). The rewrite is built once per AllReduce
algorithm (--allreduce) and CTA count of its communication kernels (--ctas, CUCOFP_COMM_CTAS): one column each,
named after the algorithm at the fast path's 32 CTAs and `algorithm@N` at N.

    PYTHONPATH=src python3 benchmarks/reductions_vs_nccl.py --world 2 --out benchmarks/results/reductions_w2.json
    PYTHONPATH=src python3 benchmarks/reductions_vs_nccl.py --world 4 --allreduce push --ctas 32,64,128
"""

from __future__ import annotations

import argparse
import concurrent.futures
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
ALGOS = {"auto": 0, "one_shot": 1, "two_shot": 2, "push": 3}   # CUCOFP_ALLREDUCE (cuco.program.space.ALLREDUCE)
BASE_CTAS = 32   # CUCOFP_COMM_CTAS's default (fastpath/cuda/lsa_point.cuh): a column named after its algorithm alone
BUS = {"allreduce": lambda w: 2 * (w - 1) / w, "reducescatter": lambda w: (w - 1) / w, "reduce": lambda w: 1.0}


def parse(out: str) -> tuple[dict[tuple[str, int], float], dict[str, int], dict[tuple[str, int], float]]:
    """({(collective, bytes): ms}, {collective: wrong elements}, {(collective, bytes): host ms to enqueue one
    call}) from the program's lines."""
    times, wrong, host = {}, {}, {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] in ("time", "host"):
            (times if parts[0] == "time" else host)[(parts[1], int(parts[2]))] = float(parts[3])
        elif len(parts) == 3 and parts[0] == "wrong":
            wrong[parts[1]] = int(parts[2])
    return times, wrong, host


def parse_ctas(text: str) -> list[int]:
    """--ctas: CTA counts per communication kernel, comma-separated, each once, in the order given."""
    out: list[int] = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        if not word.isdigit() or int(word) < 1:
            raise argparse.ArgumentTypeError(f"CTA counts are positive integers, not {word!r}")
        if int(word) not in out:
            out.append(int(word))
    if not out:
        raise argparse.ArgumentTypeError("no CTA count given")
    return out


def variants(algos: list[str], ctas: list[int]) -> dict[str, tuple[str, int]]:
    """{label: (AllReduce algorithm, CTAs per communication kernel)}: every algorithm at every CTA count, grouped by
    algorithm; the label is the algorithm's name at BASE_CTAS (every earlier table's columns), `algorithm@N` at N."""
    return {(a if n == BASE_CTAS else f"{a}@{n}"): (a, n) for a in algos for n in ctas}


def variant_source(rewrite: str, algo: str, ctas: int) -> str:
    """The rewrite with the macros a point block would set ahead of its prelude: the AllReduce algorithm, the
    ReduceScatter's with it (auto with auto, push with push, else barrier), and the CTAs per communication kernel
    where they are not the default (the default's source stays the one earlier tables built)."""
    scatter = {"auto": "0  // auto", "push": "2  // push"}.get(algo, "1  // barrier")
    head = f"#define CUCOFP_ALLREDUCE {ALGOS[algo]}  // {algo}\n#define CUCOFP_REDUCESCATTER {scatter}\n"
    if ctas != BASE_CTAS:
        head += f"#define CUCOFP_COMM_CTAS {ctas}  // CTAs per communication kernel\n"
    return head + rewrite


def rows(world: int, nccl: list[tuple], cuco: dict[str, list[tuple]]) -> list[dict[str, Any]]:
    """One row per (collective, bytes): each side's median over its runs (each run parse()'s triple), bus
    bandwidths, host enqueue times and NCCL time / side time; `cuco` holds the runs of each variant (an AllReduce
    algorithm at a CTA count, variants())."""
    out = []
    for key in sorted(nccl[0][0], key=lambda k: (list(BUS).index(k[0]), k[1])):
        coll, nbytes = key
        n_runs = [r[0][key] for r in nccl if key in r[0]]
        n_ms = statistics.median(n_runs)
        row: dict[str, Any] = {"collective": coll, "bytes": nbytes, "world": world, "nccl_ms": n_ms,
                               "nccl_busbw_gbps": nbytes / n_ms / 1e6 * BUS[coll](world), "runs_nccl_ms": n_runs}
        spreads = [(max(n_runs) - min(n_runs)) / n_ms] if len(n_runs) > 1 else []
        n_host = [r[2][key] for r in nccl if key in r[2]]
        if n_host:
            row["nccl_host_ms"] = statistics.median(n_host)
        for algo, runs in cuco.items():
            c_runs = [r[0][key] for r in runs if key in r[0]]
            if not c_runs:
                continue
            c_ms = statistics.median(c_runs)
            row[algo] = {"ms": c_ms, "busbw_gbps": nbytes / c_ms / 1e6 * BUS[coll](world), "ratio": n_ms / c_ms,
                         "runs_ms": c_runs}
            c_host = [r[2][key] for r in runs if key in r[2]]
            if c_host:
                row[algo]["host_ms"] = statistics.median(c_host)
            if len(c_runs) > 1:
                spreads.append((max(c_runs) - min(c_runs)) / c_ms)
        best = min((a for a in cuco if a in row), key=lambda a: row[a]["ms"], default=None)
        if best is not None:
            row.update(cuco_best=best, cuco_ms=row[best]["ms"], cuco_busbw_gbps=row[best]["busbw_gbps"],
                       ratio=row[best]["ratio"])
        row["spread"] = max(spreads) if spreads else None
        out.append(row)
    return out


def markdown(meta: dict[str, Any], table: list[dict[str, Any]]) -> str:
    """The table as nccl-tests readers expect it: size, then time and bus bandwidth of NCCL and of each algorithm,
    and NCCL time / the fastest cuco time."""
    algos = meta["algos"]
    lines = [f"# Device-initiated reductions vs NCCL, W = {meta['world']}", "",
             f"{meta['device']}; NCCL {meta['nccl']}; {meta['date']}; NVLink multicast off. bf16 sum, out of place; "
             "bus bandwidth as nccl-tests defines it; each side the median of its runs (each run: the median of 3 "
             "repeats of 20 back-to-back calls). The AllReduce algorithm is the program's `allreduce` directive; "
             "the ReduceScatter's (`reducescatter`) goes with it: `auto` in the auto column, `push` in the push "
             "column (buffers past the push limit, 4 MiB / W, take the barrier kernels), `barrier` in the others; "
             "Reduce depends on neither. Ratio = NCCL time / the fastest cuco time (> 1: cuco faster)."
             + (" `algorithm@N`: the rewrite with N CTAs per communication kernel (CUCOFP_COMM_CTAS), the others "
                f"{BASE_CTAS}." if any("@" in a for a in algos) else ""), "",
             f"Correctness, every size's last call (elements wrong): NCCL {meta['wrong'].get('nccl')}, "
             + ", ".join(f"cuco {a} {meta['wrong'].get(a)}" for a in algos) + ".", "",
             "| collective | size | NCCL µs | NCCL busbw GB/s | " + " | ".join(f"{a} µs | {a} GB/s" for a in algos)
             + " | ratio |", "|---|---|---|---|" + "---|---|" * len(algos) + "---|"]
    for r in table:
        size = size_label(r["bytes"])
        cells = [f"{r[a]['ms'] * 1e3:.1f} | {r[a]['busbw_gbps']:.1f}" if a in r else "- | -" for a in algos]
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "-"
        lines.append(f"| {r['collective']} | {size} | {r['nccl_ms'] * 1e3:.1f} | {r['nccl_busbw_gbps']:.1f} | "
                     + " | ".join(cells) + f" | {ratio} |")
    small = [r for r in table if r["bytes"] <= 4 << 20 and "nccl_host_ms" in r]
    if small:
        lines += ["", "Host time to enqueue one call, µs (the slowest rank's median over the repeats; where it is "
                  "close to the call's time above, the GPU waited for the host):", "",
                  "| collective | size | NCCL | " + " | ".join(algos) + " |", "|---|---|---|" + "---|" * len(algos)]
        for r in small:
            cells = [f"{r[a]['host_ms'] * 1e3:.1f}" if a in r and "host_ms" in r[a] else "-" for a in algos]
            lines.append(f"| {r['collective']} | {size_label(r['bytes'])} | {r['nccl_host_ms'] * 1e3:.1f} | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def size_label(nbytes: int) -> str:
    """64 KiB, 1 MiB, 1 GiB."""
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if nbytes >= 1 << shift:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes >> 10} KiB"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2, help="runs of each binary, alternating (default 2)")
    ap.add_argument("--timeout-s", type=float, default=240)
    ap.add_argument("--allreduce", default="auto,one_shot,two_shot,push",
                    help="AllReduce algorithms of the rewrite to time (the program's allreduce directive)")
    ap.add_argument("--ctas", type=parse_ctas, default=[BASE_CTAS],
                    help=f"CTAs per communication kernel, comma-separated (default {BASE_CTAS}): one rewrite per "
                    "AllReduce algorithm and count (CUCOFP_COMM_CTAS), each its own column")
    ap.add_argument("--out", default="reductions.json")
    ap.add_argument("--build-only", action="store_true", help="build every side, print where, and stop (no GPU)")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE.parent / "src"))
    from cuco.fastpath import verify
    from cuco.fastpath.analyze import analyze
    from cuco.fastpath.transform import transform

    text = PROGRAM.read_text()
    rewrite = transform(analyze(text, PROGRAM.name), text)
    sides = variants([a for a in args.allreduce.split(",") if a], args.ctas)
    algos = list(sides)
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cuco-reductions"
    sources = {"nccl": text, **{label: variant_source(rewrite.code, a, n) for label, (a, n) in sides.items()}}

    toolchain = verify.host_toolchain()

    def build(side: str):
        return verify.build(sources[side], workdir=work / side, include_dirs=[PROGRAM.parent], name="sweep",
                            toolchain=toolchain)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(sources), os.cpu_count() or 1))) as pool:
        builds = dict(zip(sources, pool.map(build, sources)))   # one nvcc each, side by side
    binaries = {}
    for side, built in builds.items():
        if not built.ok:
            print(f"{side} build failed:\n{built.log[-3000:]}", file=sys.stderr)
            return 1
        binaries[side] = built.binary
    if args.build_only:
        for side, binary in binaries.items():
            print(f"{side}: {binary}")
        return 0
    env = {**os.environ, "WORLD_SIZE": str(args.world), "NCCL_NVLS_ENABLE": "0"}
    results: dict[str, list] = {side: [] for side in sources}
    for _run in range(args.runs):
        for side in sources:  # alternating, so drift touches every side alike
            p = subprocess.run([str(binaries[side])], env=env, capture_output=True, text=True, timeout=args.timeout_s)
            print(f"# {side}: exit {p.returncode}\n{p.stdout}{p.stderr[-2000:]}", flush=True)
            results[side].append(parse(p.stdout))
    if not results["nccl"] or not results["nccl"][0][0]:
        print("the NCCL program printed no times", file=sys.stderr)
        return 1
    import torch

    meta = {"world": args.world, "device": torch.cuda.get_device_name(0), "algos": algos,
            "variants": {label: {"allreduce": a, "comm_ctas": n} for label, (a, n) in sides.items()},
            "nccl": ".".join(map(str, torch.cuda.nccl.version())), "rules": list(rewrite.rules_applied),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "wrong": {side: [r[1] for r in runs] for side, runs in results.items()}}
    table = rows(args.world, results["nccl"], {a: results[a] for a in algos})
    Path(args.out).write_text(json.dumps({**meta, "rows": table}, indent=1))
    Path(args.out).with_suffix(".md").write_text(markdown(meta, table))
    print(markdown(meta, table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
