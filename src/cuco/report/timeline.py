"""Per-rank timelines of the host program and a run's best candidates: the harness traces a few untimed launches
with CUPTI (`HarnessRequest(trace_dir=...)`), this module turns its records into Chrome/Perfetto trace JSON with
each kernel and copy classified as compute or communication, and `trace_run` does both for a run directory."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any, Sequence

from cuco.errors import CucoError
from cuco.report.charts import finite
from cuco.report.data import TIMELINE_DIR, load_run

#: Kernel names of data movement and synchronisation (NCCL's, the kit's pull/put/barrier kernels, copies).
COMM_NAMES = re.compile(r"nccl|pull|push|put_|_put|gather|scatter|alltoall|all_to_all|barrier|wait|signal|"
                        r"copy|send|recv|dispatch|combine", re.IGNORECASE)


def classify(record: dict[str, Any]) -> str:
    """'communication' for copies and data-movement or synchronisation kernels, else 'compute'."""
    if record.get("kind") == "memcpy":
        return "communication"
    if record.get("kind") == "memset":
        return "other"
    return "communication" if COMM_NAMES.search(str(record.get("name", ""))) else "compute"


def to_chrome_trace(harness_files: Sequence[Path], title: str) -> dict[str, Any]:
    """One Chrome trace (complete events in µs, one process per rank, one thread per stream) from the harness's
    trace file(s) of one candidate (one file in thread mode, one per rank in process mode)."""
    events: list[dict[str, Any]] = []
    t0: int | None = None
    loaded = []
    for f in harness_files:
        data = json.loads(Path(f).read_text())
        loaded.append(data)
        for r in data.get("records", []):
            t0 = r["start_ns"] if t0 is None else min(t0, r["start_ns"])
    for data in loaded:
        ranks = {int(k): int(v) for k, v in data.get("devices", {}).items()}
        for r in data.get("records", []):
            rank = ranks.get(int(r["device"]), int(r["device"]))
            events.append({"ph": "X", "name": r["name"], "cat": classify(r), "pid": f"rank {rank}",
                           "tid": f"stream {r['stream']}", "ts": (r["start_ns"] - (t0 or 0)) / 1e3,
                           "dur": max(r["end_ns"] - r["start_ns"], 0) / 1e3,
                           "args": {"bytes": r.get("bytes", 0), "peer": r.get("peer", False),
                                    "device": r["device"]}})
    events.sort(key=lambda e: (e["pid"], e["tid"], e["ts"]))
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"title": title,
                                                                          "source": "CUPTI activity records"}}


def overlap_us(trace: dict[str, Any]) -> float:
    """Time (µs) during which compute and communication events run at once on the same rank."""
    total = 0.0
    by_rank: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for e in trace.get("traceEvents", []):
        # an event without a finite start and length (a hand-edited or foreign trace) has no span to overlap
        if not isinstance(e, dict) or e.get("cat") not in ("compute", "communication"):
            continue
        ts, dur = finite(e.get("ts")), finite(e.get("dur"))
        if ts is not None and dur is not None:
            by_rank.setdefault(str(e.get("pid")), {}).setdefault(e["cat"], []).append((ts, ts + dur))
    for cats in by_rank.values():
        for a0, a1 in union_spans(cats.get("compute", [])):
            for b0, b1 in union_spans(cats.get("communication", [])):
                total += max(0.0, min(a1, b1) - max(a0, b0))
    return total


def union_spans(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """`spans` (start, end) merged where they touch or overlap, in order."""
    out: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def trace_run(run_dir: str | Path, top: int = 2, timeout_s: float = 120.0) -> list[Path]:
    """Trace the host program and the `top` best verified candidates of a run of a built-in workload, on this
    machine's GPUs; writes RUN_DIR/timeline/<name>.json (Chrome trace) and returns the paths."""
    from cuco import workloads  # noqa: PLC0415
    from cuco.evaluate.compile import Compiler  # noqa: PLC0415
    from cuco.harness import HarnessRequest, build_shared, gpu_count, run_harness  # noqa: PLC0415
    from cuco.kit.compute import link_options  # noqa: PLC0415
    from cuco.toolchain import default_toolchain  # noqa: PLC0415

    run = load_run(run_dir)
    world = int(run.manifest.get("world") or 0)
    shape = str(run.manifest.get("shape") or "")
    if world < 1 or not shape:
        raise CucoError(f"{run.run_dir}/manifest.json names no world or shape, so the run cannot be traced again")
    if run.workload not in workloads.available():
        raise CucoError(f"{run.workload} is not a built-in workload (a program or a workload folder): its timelines "
                        "are not traced here; run RUN_DIR/best/kernel.cu under a profiler (nsys) to see one")
    if gpu_count() < world:
        raise CucoError(f"tracing this run needs {world} GPU(s); {gpu_count()} visible here: run it on the machine "
                        "that ran the search")
    wl = workloads.get(run.workload)
    best = sorted((c for c in run.candidates if c.status == "passed" and c.fitness is not None),
                  key=lambda c: -(c.fitness or 0.0))[:top]
    named = [("host", wl.seed_code())] + [(f"best{i + 1}-{c.id[:8]}", c.code) for i, c in enumerate(best)]
    tc = default_toolchain()
    link = link_options(wl, tc)
    outcomes = Compiler(tc).compile_many([code for _, code in named], link.libraries, link.include_dirs, link.extra)
    bad = [n for (n, _), o in zip(named, outcomes) if not o.ok]
    if bad:
        raise CucoError(f"could not recompile {bad} for tracing; the toolchain changed since the run?")
    plugin = build_shared(wl.plugin_path(), link.libraries, toolchain=tc, include_dirs=link.include_dirs,
                          extra=link.extra)
    dims = tuple(int(x) for x in re.split(r"[x,]", shape))
    out_dir = run.run_dir / TIMELINE_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory(prefix="cuco-trace-") as tmp:
        res = run_harness(HarnessRequest(plugin, [o.so_path for o in outcomes], dims, world=world, verify=False,
                                         bench=False, timeout_s=timeout_s, trace_dir=Path(tmp)))
        if res.processes != 1:  # a restarted process numbers its candidates from 0 again: files are ambiguous
            raise CucoError(f"the traced run needed {res.processes} harness processes ({res.message}); "
                            "no timeline written")
        for i, ((name, _), c) in enumerate(zip(named, res.candidates)):
            files = sorted(Path(tmp).glob(f"candidate{i}.json")) + sorted(Path(tmp).glob(f"candidate{i}.rank*.json"))
            if c.status != "ok" or not files:
                continue
            path = out_dir / f"{name}.json"
            path.write_text(json.dumps(to_chrome_trace(files, f"{run.workload} {shape} W={world}: {name}")))
            written.append(path)
    return written
