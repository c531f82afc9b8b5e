"""Where a schedule's time goes: named points of a workload (and its host seed) traced on the GPU. One harness
process launches each point three times under CUPTI, after one launch whose records are dropped
(cuco.report.timeline). The script writes one Chrome trace per point and prints each rank's average per launch:
the span from first to last activity, compute and communication busy time (a kernel's class by its name, as the
timeline report does), their overlap, the span not covered by compute, and the kernels by total time. compare_points.py
times points. This script shows what is inside them.

    python3 benchmarks/trace_points.py --workload moe --world 2 --shape paper-r1 \\
        --points lsa/deferred/world/cta/whole/dispatch_dtype=bf16,fastpath --out DIR

Exit 1 when a point was not traced (its reason is printed).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from points import add_point_arguments, point_codes, point_names  # noqa: E402

TRACED_LAUNCHES = 3  # csrc/harness/rank_trace.cpp kTracedLaunches


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in spans)


def breakdown(trace: dict[str, Any], launches: int = TRACED_LAUNCHES, top: int = 8) -> dict[str, dict[str, Any]]:
    """Per rank (the trace's pid), averages per launch in µs: span, compute, communication, overlap, uncovered (span
    not under any compute kernel), and the `top` kernels by total time (name, calls, µs)."""
    from cuco.report.timeline import overlap_us, union_spans

    by_rank: dict[str, list[dict[str, Any]]] = {}
    for e in trace.get("traceEvents", []):
        if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("ts"), (int, float)) \
                and isinstance(e.get("dur"), (int, float)):
            by_rank.setdefault(str(e.get("pid")), []).append(e)
    out: dict[str, dict[str, Any]] = {}
    for rank, events in sorted(by_rank.items()):
        spans = {cat: union_spans([(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == cat])
                 for cat in ("compute", "communication")}
        start = min(e["ts"] for e in events)
        end = max(e["ts"] + e["dur"] for e in events)
        kernels: dict[str, list[float]] = {}
        for e in events:
            k = kernels.setdefault(str(e.get("name")), [0, 0.0])
            k[0] += 1
            k[1] += e["dur"]
        ranked = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]
        out[rank] = {
            "span_us": (end - start) / launches,
            "compute_us": _length(spans["compute"]) / launches,
            "communication_us": _length(spans["communication"]) / launches,
            "overlap_us": overlap_us({"traceEvents": events}) / launches,
            "uncovered_us": (end - start - _length(spans["compute"])) / launches,
            "kernels": [{"name": _short(n), "calls": c / launches, "us": t / launches} for n, (c, t) in ranked],
        }
    return out


def _short(name: str, limit: int = 70) -> str:
    """A kernel's name without its template arguments and parameter list (CUTLASS's run to kilobytes)."""
    base = re.sub(r"<.*", "", re.sub(r"\(.*", "", name)).strip()
    return base[:limit] or name[:limit]


def lines(label: str, parts: dict[str, dict[str, Any]]) -> list[str]:
    """The console lines of one point's breakdown."""
    out = [f"{label}:"]
    for rank, p in parts.items():
        out.append(f"  {rank}: span {p['span_us']:.1f} us = compute {p['compute_us']:.1f} + uncovered "
                   f"{p['uncovered_us']:.1f}; communication {p['communication_us']:.1f} (under compute "
                   f"{p['overlap_us']:.1f})")
        out += [f"    {k['us']:8.1f} us  x{k['calls']:.0f}  {k['name']}" for k in p["kernels"]]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_point_arguments(ap)
    ap.add_argument("--out", type=Path, required=True, help="folder for the traces and breakdown.json")
    a = ap.parse_args(argv)
    names = point_names(a.points)
    from cuco.harness.runner import HarnessRequest, run_harness
    from cuco.report.timeline import to_chrome_trace
    from cuco.workloads import get
    from record import PHASE_TIMEOUT_S, _built, source_commit

    ev, sos = _built(a.workload, a.shape, a.world, point_codes(get(a.workload), names), "tracing at")
    labels = list(sos)
    a.out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"workload": a.workload, "shape": a.shape, "world": a.world,
                               "launches_per_point": TRACED_LAUNCHES, "commit": source_commit(), "points": {}}
    missing = []
    with tempfile.TemporaryDirectory(prefix="cuco-trace-points-") as tmp:
        res = run_harness(HarnessRequest(ev.plugin(), [sos[k] for k in labels], tuple(ev.bench_shape.dims),
                                         world=a.world, verify=False, bench=False, timeout_s=PHASE_TIMEOUT_S,
                                         trace_dir=Path(tmp)), toolchain=ev.compiler.toolchain)
        summary.update(device=res.device, nccl_version=res.nccl_version, date=res.date)
        for i, label in enumerate(labels):
            files = sorted(Path(tmp).glob(f"candidate{i}.json")) + sorted(Path(tmp).glob(f"candidate{i}.rank*.json"))
            if not files or res.processes != 1:
                missing.append(f"{label}: no trace ({res.status}: {res.message})"[:400])
                continue
            trace = to_chrome_trace(files, f"{a.workload} {a.shape} W={a.world}: {label}")
            (a.out / f"{re.sub(r'[^A-Za-z0-9_.=-]+', '_', label)}.json").write_text(json.dumps(trace))
            summary["points"][label] = breakdown(trace)
            print("\n".join(lines(label, summary["points"][label])), flush=True)
    (a.out / "breakdown.json").write_text(json.dumps(summary, indent=1))
    for m in missing:
        print(f"trace_points: {m}", flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
