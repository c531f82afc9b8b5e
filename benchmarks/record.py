"""Figures of record (docs/measuring.md): after a search, the host seed, the best point and the fast path are
re-timed together in >= 3 interleaved repeats on full-entropy bf16 inputs — the distribution torch's anchors see —
each repeat one harness process with the parts (compute alone, communication alone); a figure is the median over
repeats, `spread` the largest (max - min) / median among the figures, and repeats go on while it exceeds 0.03 (at
most `max_repeats`). One more repeat on the harness's 256-level inputs gives the `*_q` fields. At W >= 2 a results
file also records the machine: `nvidia-smi topo -m` and measured peer-to-peer bandwidth."""

from __future__ import annotations

import contextlib
import fcntl
import os
import statistics
import subprocess
import time
from typing import Any, Callable, Iterator

SPREAD_LIMIT = 0.03
# A figure whose median is under this is below the harness's resolution (CUDA events, one launch per iteration):
# W = 1's communication part is 2 µs, and 1 µs of jitter is a spread of 0.5 there. Its spread is still reported
# (spread_by_figure) but neither holds the repeats back nor marks the row above the limit.
RESOLUTION_MS = 0.01
# Each repeat is a new harness process whose first timed target is the compute part; without a warm-up the GPU
# meets it at idle clocks (the parts showed the widest spreads, 0.09 to 0.2, in the first W = 4 files).
WARM_MS = 300.0
# A repeat's harness phase (load, setup, verify, bench of one candidate) that outlasts this is reported by the
# harness's watchdog as a hang, with its candidate and phase, long before the benchmark part's own limit cuts the
# whole call off with nothing said (a W = 2 GEMM+AllGather re-timing sat silent for minutes in its second repeat).
PHASE_TIMEOUT_S = float(os.environ.get("CUCO_RECORD_PHASE_TIMEOUT_S", "90"))
FIGURES = ("host_ms", "best_ms", "fastpath_ms", "compute_ms", "comm_ms")
# Launches per timed iteration (CUCO_RECORD_LAUNCHES, default 1: one launch from an idle GPU after a host barrier,
# as every figure of record so far). More: that many back to back per iteration, the steady state of a training step
# (HarnessRequest.launches_per_iteration); the row says which.
LAUNCHES = int(os.environ.get("CUCO_RECORD_LAUNCHES", "1"))


def _one_run(ev: Any, sos: dict[str, Any], order: list[str], inputs: str, verify: bool, iters: int) -> dict[str, Any]:
    """One harness process timing `order` (labels of `sos`) and the parts; per-label median ms (max over ranks)."""
    from cuco.harness.runner import HarnessRequest, run_harness

    res = run_harness(HarnessRequest(ev.plugin(), [sos[k] for k in order], tuple(ev.bench_shape.dims), world=ev.world,
                                     seeds=(1,), inputs=inputs, verify=verify, bench=True, parts=True, warmup=5,
                                     iters=iters, timeout_s=PHASE_TIMEOUT_S, warm_ms=WARM_MS,
                                     launches_per_iteration=LAUNCHES),
                      toolchain=ev.compiler.toolchain)
    by_path = {str(r.path): r for r in res.candidates}
    out: dict[str, Any] = {"status": {}, "failures": {}}
    for label in order:
        run = by_path.get(str(sos[label]))
        out["status"][label] = run.status if run is not None else "missing"
        if run is None or run.status not in ("ok", "verify_failed"):  # a wrong result is data; a hang is not
            # whole: a hang's message ends with every rank's last step, which says where it stopped
            out["failures"][label] = (f"{run.status} in phase {run.phase or '?'}: {run.message}"[:2000]
                                      if run is not None else f"missing ({res.status}: {res.message})"[:400])
        ms = run.timing.max_median_ms if run is not None and run.status == "ok" and run.timing else None
        out[f"{label}_ms"] = ms
    out["compute_ms"], out["comm_ms"] = ev._parts(res)
    out["device"], out["nccl_version"], out["date"] = res.device, res.nccl_version, res.date
    return out


def source_commit() -> str:
    """The commit a figure was measured at: CUCO_COMMIT (the GPU machine's copy of the tree may carry an older .git,
    so the caller names the commit it sent), else `git rev-parse --short HEAD`, marked when the tree has local
    changes; "unknown" outside a repository."""
    named = os.environ.get("CUCO_COMMIT", "").strip()
    if named:
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=30)
        dirty = subprocess.run(["git", "-C", here, "diff", "--quiet", "HEAD", "--", "../src", "../csrc"],
                               capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("+local changes" if dirty.returncode != 0 else "")


def retime(workload: str, shape: str, world: int, codes: dict[str, str], repeats: int = 3,
           max_repeats: int | None = None, iters: int = 30) -> dict[str, Any]:
    """Figures of record for `codes` ({'best': ..., 'fastpath': ...}; the host seed is added) at `shape`, from at
    least `repeats` repeats; each repeat's figures stay in `per_repeat` (for paired differences). The timed
    repeats hold a machine-wide lock (RECORD_LOCK), so two benchmark processes on disjoint GPUs of one host never
    re-time at the same moment. max_repeats: CUCO_RECORD_MAX_REPEATS, else 7 (never fewer than `repeats`)."""
    if max_repeats is None:
        max_repeats = int(os.environ.get("CUCO_RECORD_MAX_REPEATS", "7"))
    max_repeats = max(max_repeats, repeats)
    ev, sos = _built(workload, shape, world, codes, "re-timing")
    labels = list(sos)
    with record_lock() as waited_s:
        start = time.monotonic()
        _say(f"{workload} {shape}: lock held after {waited_s:.1f} s")
        runs = repeat_until_steady(lambda order, verify: _one_run(ev, sos, order, "full", verify, iters), labels,
                                   repeats, max_repeats, f"{workload} {shape}")
        q = _one_run(ev, sos, labels, "q256", verify=False, iters=iters)
    row = {k: _median(runs, k) for k in FIGURES}
    spread, by_figure = _spread(runs)
    row.update(spread=spread, spread_by_figure=by_figure, repeats=len(runs), inputs="full",
               per_repeat=[{k: r.get(k) for k in FIGURES} for r in runs],
               verified_full_entropy=all(s == "ok" for s in runs[0]["status"].values()),
               statuses=runs[0]["status"], retime_wall_s=round(time.monotonic() - start, 1),
               record_lock_wait_s=round(waited_s, 1), iters=iters, launches_per_iteration=LAUNCHES,
               spread_above_limit=spread > SPREAD_LIMIT,
               device=runs[0]["device"], nccl_version=runs[0]["nccl_version"], date=runs[0]["date"],
               commit=source_commit(), **{f"{k}_q": q.get(k) for k in FIGURES})
    row.update(derived(row))
    row.update({f"{k}_q": v for k, v in derived({k: q.get(k) for k in FIGURES}).items()})
    return row


def _built(workload: str, shape: str, world: int, codes: dict[str, str],
           doing: str) -> tuple[Any, dict[str, Any]]:
    """The workload's evaluator at `shape` and the shared objects of the host seed ('host') and `codes`, by label;
    an error saying what it was `doing` and naming the first that does not compile."""
    from cuco.evaluate.cascade import Evaluator
    from cuco.workloads import get

    wl = get(workload)
    ev = Evaluator(wl, world=world, bench_shape=shape)
    link = ev.link()
    labels = ["host", *codes]
    t0 = time.monotonic()
    built = ev.compiler.compile_many([wl.seed_code(), *codes.values()], link.libraries, link.include_dirs, link.extra)
    _say(f"{workload} {shape}: {len(built)} programs built in {time.monotonic() - t0:.1f} s; waiting for the lock")
    bad = [(k, b.log_excerpt) for k, b in zip(labels, built) if not b.ok]
    if bad:
        raise RuntimeError(f"{doing} {workload} {shape}: {bad[0][0]} does not compile: {bad[0][1][:500]}")
    return ev, {k: b.so_path for k, b in zip(labels, built)}


def fastest(runs: list[dict[str, Any]], labels: list[str]) -> tuple[str, dict[str, float | None]]:
    """The label with the smallest median time over `runs` (`<label>_ms` each; a label never timed loses), and every
    label's median."""
    medians = {k: _median(runs, f"{k}_ms") for k in labels}
    timed = [k for k in labels if medians[k] is not None]
    if not timed:
        raise RuntimeError(f"no finalist was timed: {', '.join(labels)}")
    return min(timed, key=lambda k: medians[k]), medians


def select_fastest(workload: str, shape: str, world: int, codes: dict[str, str], repeats: int = 3,
                   iters: int = 30) -> dict[str, Any]:
    """Which of `codes` (finalists by label; the host seed is added as 'host') runs fastest at `shape`: `repeats`
    interleaved repeats on full-entropy inputs, the first verified, each one harness process; the choice is made on
    these repeats and the figures of record are taken afterwards on fresh ones (`retime`), so the chosen program's
    figures are not the minimum of the same noisy samples it was chosen by."""
    ev, sos = _built(workload, shape, world, codes, "selecting at")
    labels = list(sos)
    with record_lock():  # exactly `repeats`: the choice needs no steadiness of its own, the record after it does
        runs = repeat_until_steady(lambda order, verify: _one_run(ev, sos, order, "full", verify, iters), labels,
                                   repeats, repeats, f"selecting at {workload} {shape}")
    winner, medians = fastest(runs, labels)
    _say(f"{workload} {shape}: fastest of {len(labels)} over {repeats} repeats: {winner}")
    return {"chosen": winner, "medians_ms": medians, "repeats": repeats}


def repeat_until_steady(run_once: Callable[[list[str], bool], dict[str, Any]], labels: list[str], repeats: int,
                        max_repeats: int, what: str) -> list[dict[str, Any]]:
    """Repeats of `run_once(order, verify)` in alternating order (no candidate always runs first), the first one
    verified, until `repeats` are in and the spread is within SPREAD_LIMIT, or `max_repeats`. A repeat in which a
    candidate hangs, crashes or errs ends the re-timing with an error naming the candidate, phase and order."""
    runs: list[dict[str, Any]] = []
    start = time.monotonic()
    while len(runs) < max_repeats:
        order = labels if len(runs) % 2 == 0 else labels[::-1]
        run = run_once(order, not runs)
        if run.get("failures"):
            said = "; ".join(f"{k}: {v}" for k, v in run["failures"].items())
            _say(f"{what}: repeat {len(runs) + 1} (order {', '.join(order)}) failed: {said}")
            raise RuntimeError(f"re-timing {what}: repeat {len(runs) + 1} in the order {', '.join(order)} "
                               f"failed: {said}")
        runs.append(run)
        _say(f"{what}: repeat {len(runs)} at {time.monotonic() - start:.1f} s, spread {_spread(runs)[0]:.3f}")
        if len(runs) >= repeats and _spread(runs)[0] <= SPREAD_LIMIT:
            break
    return runs


RECORD_LOCK = "/tmp/cuco-record.lock"


def _say(text: str) -> None:
    """A progress line of the re-timing in the benchmark's log (where a call cut off by its limit spent its time)."""
    print(f"record: {text}", flush=True)


@contextlib.contextmanager
def record_lock() -> Iterator[float]:
    """Hold the host's re-timing lock; yields the seconds waited for it."""
    t0 = time.monotonic()
    with open(RECORD_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield time.monotonic() - t0
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def derived(f: dict[str, Any]) -> dict[str, Any]:
    """speedup, bound and overlap efficiency from host, best, compute and communication times."""
    host, best, comp, comm = (f.get(k) for k in ("host_ms", "best_ms", "compute_ms", "comm_ms"))
    out: dict[str, Any] = {"speedup": host / best if host and best else None}
    bound = max(comp, comm) if comp is not None and comm is not None else None
    out["bound_ms"] = bound
    out["overlap_efficiency"] = ((host - best) / (host - bound) if host and best and bound is not None
                                 and host > bound else None)
    return out


# Student's t at 97.5 % for 1..30 degrees of freedom (two-sided 95 % confidence); the normal quantile above 30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def paired_difference(per_repeat: list[dict[str, Any]], a: str, b: str) -> tuple[float, float] | None:
    """The mean of `a - b` over repeats where both were timed (each repeat one harness process, so the two are
    paired: drift between repeats cancels) and the half-width of its 95 % confidence interval (Student's t); None
    with fewer than two pairs."""
    d = [r[a] - r[b] for r in per_repeat if r.get(a) is not None and r.get(b) is not None]
    if len(d) < 2:
        return None
    t = _T975[len(d) - 2] if len(d) - 1 <= len(_T975) else statistics.NormalDist().inv_cdf(0.975)
    return statistics.fmean(d), t * statistics.stdev(d) / len(d) ** 0.5


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    xs = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(xs) if xs else None


def _spread(runs: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
    """The widest (max - min) / median among the figures at or above RESOLUTION_MS, and every figure's own."""
    by: dict[str, float] = {}
    counted: list[float] = []
    for k in FIGURES:
        xs = [r[k] for r in runs if r.get(k) is not None]
        if len(xs) >= 2 and statistics.median(xs) > 0:
            by[k] = (max(xs) - min(xs)) / statistics.median(xs)
            if statistics.median(xs) >= RESOLUTION_MS:
                counted.append(by[k])
    return (max(counted) if counted else 0.0), by


def search_costs(run_dir: Any, workload: str, wall_s: float) -> dict[str, Any]:
    """compile_s: nvcc seconds of the run's candidates, summed (compiles run in parallel, so this can exceed the
    wall time); seconds_per_evaluation: the harness's seconds (verification and timing) per evaluation, compilation
    excluded; search_wall_s stays the whole search's wall time."""
    from cuco.db import CandidateDB

    db = CandidateDB(run_dir / "candidates.db", readonly=True)
    try:
        cands = db.all(workload)
    finally:
        db.close()
    compile_s = sum(c.results["compile"].seconds or 0.0 for c in cands if "compile" in c.results)
    harness_s = sum(c.results[lv].seconds or 0.0 for c in cands for lv in ("verify", "bench") if lv in c.results)
    n = len(cands)
    return {"compile_s": round(compile_s, 1), "harness_s": round(harness_s, 1),
            "seconds_per_evaluation": round(harness_s / n, 2) if n else None}


def machine(world: int) -> dict[str, Any]:
    """The machine a W >= 2 results file was measured on: `nvidia-smi topo -m` and peer-to-peer GB/s (from
    CUCO_P2P_JSON, measured with nothing else running, when set: results_rows.machine_or_measured)."""
    if world < 2:
        return {}
    from results_rows import machine_or_measured

    return machine_or_measured(world, _measured_machine)


def _measured_machine(world: int) -> dict[str, Any]:
    try:
        topo = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        topo = f"nvidia-smi topo -m failed: {exc}"
    from p2p_bandwidth import measure

    return {"topology": topo, "p2p": measure(world, mib=128, reps=5)}


def fmt(v: Any, nd: int = 3) -> str:
    """A figure for a results table: `nd` decimals, or a dash where there is none."""
    return f"{v:.{nd}f}" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def record_lines(meta: dict[str, Any]) -> list[str]:
    """Markdown lines every results file ends with: how its figures were measured, the machine, and per row the
    repeats, spread, 256-level figures and what its search cost."""
    lines = ["", "Figures of record (docs/measuring.md): host, best, fast path and the parts re-timed together on "
             "full-entropy bf16 inputs, median of >= 3 interleaved repeats (each one harness process, every rank "
             f"waited on), repeated while the spread exceeds {SPREAD_LIMIT}; `*_q`: one repeat on 256-level inputs.",
             ""]
    p2p = (meta.get("machine") or {}).get("p2p")
    if p2p:
        lines.append(f"Machine: peer-to-peer copy {fmt(p2p.get('one_peer_median_gbps'), 0)} GB/s one peer at a time, "
                     f"{fmt(p2p.get('ring_all_at_once_gbps_per_rank'), 0)} GB/s per rank with every rank sending to "
                     f"its next at once, {fmt(p2p.get('all_pairs_at_once_gbps_per_rank_in'), 0)} GB/s into each rank "
                     "with all pairs at once (`nvidia-smi topo -m` in the JSON).")
        lines.append("")
    lines += ["| shape | measured | repeats | spread | verified (full entropy) | host_q | best_q | search s | "
              "compile s | s / evaluation |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in meta.get("rows", []):
        when = f"{r.get('device', '?')}, {str(r.get('date') or '?')[:16]}, commit {r.get('commit') or '?'}"
        if r.get("superseded"):
            when += f" — superseded: {r['superseded']}"
        if r.get("first_points"):  # evaluations the search did not choose (CUCO_FIRST_POINTS)
            when += f" — search began with {', '.join(f'`{x}`' for x in r['first_points'])}"
        if r.get("record_error"):  # its figures above are the search's, one repeat on 256-level inputs
            when += f" — not re-timed, search figures only: {r['record_error'][:240]}"
        lines.append(f"| {r.get('shape', r.get('M', '?'))} | {when} | {r.get('repeats', '—')} | "
                     f"{fmt(r.get('spread'))} | {r.get('verified_full_entropy', '—')} | {fmt(r.get('host_ms_q'))} | "
                     f"{fmt(r.get('best_ms_q'))} | "
                     f"{fmt(r.get('search_wall_s'), 1)} | {fmt(r.get('compile_s'), 1)} | "
                     f"{fmt(r.get('seconds_per_evaluation'), 2)} |")
    leases = sorted({str(r.get("date") or "?")[:13] for r in meta.get("rows", [])})
    if len(leases) > 1:
        lines += ["", f"Rows come from {len(leases)} device calls (hours {', '.join(leases)}, UTC) on machines of the "
                  "kind named per row; each row's host, cuco and torch figures come from one call, back to back."]
    return lines
