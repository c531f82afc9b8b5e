"""Ring attention at W ranks (--world, default 1; W = 1 is plain flash attention on one GPU), in one call: per shape
the host baseline, the fast-path candidate and the best point of an offline directive search (verified under delayed
arrival), the compute library's attention alone (the harness's "compute" part, same process as host and best), and
at W = 1 torch's scaled_dot_product_attention on the same shape and GPU, the faster of its flash and cuDNN backends,
and the two side by side in this process (the library called through ctypes, rounds interleaved with SDPA's).

    PYTHONPATH=src python3 benchmarks/attention_cp.py --out benchmarks/results [--evals 6] [--shapes s4096-d32,...]

Writes attention_cp_w<W>.json and attention_cp_w<W>.md under --out after every shape (a cut-off run keeps what it
measured). Every cuco time comes from the harness (CUDA events, median of the timed iterations); torch times are
CUDA-event medians of 30 calls after 5 warm-up calls (benchmarks/event_timing.py).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import os
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record import fmt, machine, record_lines  # noqa: E402  (a sibling script)
from results_rows import (merge_torch, newest_row, open_meta, put_error, put_row, save_meta,  # noqa: E402
                          torch_rows)  # (a sibling script)
from search_rows import search_row  # noqa: E402  (a sibling script)

RESULTS = HERE / "results"


def sdpa_calls(dims: dict[str, int]) -> dict[str, Any]:
    """torch SDPA (bf16, randn inputs in [1, H, S, D]) on this shape, one call per backend: flash, cuDNN."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s, hq, hkv, d, causal = (dims[k] for k in ("S", "HQ", "HKV", "D", "CAUSAL"))
    q = torch.randn(1, hq, s, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))

    def call_with(backend):
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=hq != hkv)
        return call

    return {"flash": call_with(SDPBackend.FLASH_ATTENTION), "cudnn": call_with(SDPBackend.CUDNN_ATTENTION)}


def anchor(dims: dict[str, int]) -> dict[str, Any]:
    """torch SDPA on this shape: each of the flash and cuDNN backends, and the faster."""
    import torch

    from event_timing import event_times_ms

    out: dict[str, Any] = {"torch": torch.__version__}
    for name, call in sdpa_calls(dims).items():
        try:
            out[f"anchor_{name}_ms"] = statistics.median(event_times_ms(call, iters=30, warmup=5))
        except RuntimeError as exc:  # a backend that does not take this shape
            out[f"anchor_{name}_error"] = str(exc)[:300]
    timed = {n: out[f"anchor_{n}_ms"] for n in ("flash", "cudnn") if f"anchor_{n}_ms" in out}
    if timed:
        best = min(timed, key=timed.get)
        out.update(anchor_ms=timed[best], anchor_backend=best)
    return out


def same_process(dims: dict[str, int], library: Path, rounds: int = 7, iters: int = 20) -> dict[str, Any]:
    """The compute library's attention at W = 1 (the ring's single step: one FMHA call writing bf16 O and the LSE,
    what the harness's compute part runs) and torch SDPA (flash, cuDNN) on the same shape in this process, in
    `rounds` interleaved rounds of `iters` timed calls each: per side the median over rounds of each round's
    median. Like for like: one process, one GPU clock history (the harness and this script run apart otherwise)."""
    import torch

    from event_timing import event_times_ms

    s, hq, hkv, d, causal = (dims[k] for k in ("S", "HQ", "HKV", "D", "CAUSAL"))
    lib = ctypes.CDLL(str(library))
    block = lib.cuco_attn_block_bf16
    block.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2 + [ctypes.c_int] * 3 + [
        ctypes.c_int64, ctypes.c_int, ctypes.c_void_p]
    q = torch.randn(s, hq, d, device="cuda", dtype=torch.bfloat16)  # the library's layout: [S][H][D]
    k, v = (torch.randn(s, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    lse = torch.empty(hq, s, device="cuda", dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream

    def library_call():
        rc = block(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), s, s, hq, hkv, d, s,
                   causal, stream)
        if rc:
            raise RuntimeError(f"cuco_attn_block_bf16 returned {rc}")

    sides = {"library": library_call, **sdpa_calls(dims)}  # torch's own inputs, as anchor()
    out: dict[str, Any] = {}
    for name in list(sides):  # warm each side; a backend that does not take the shape drops out
        try:
            event_times_ms(sides[name], iters=1, warmup=5)
        except RuntimeError as exc:
            out[f"same_process_{name}_error"] = str(exc)[:300]
            del sides[name]
    rounds_ms: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, call in sides.items():
            rounds_ms[name].append(statistics.median(event_times_ms(call, iters=iters, warmup=1)))
    for name, times in rounds_ms.items():
        out[f"same_process_{name}_ms"] = statistics.median(times)
        out[f"same_process_{name}_spread"] = (max(times) - min(times)) / statistics.median(times)
    torch_sides = [n for n in ("flash", "cudnn") if n in rounds_ms]
    if "library" in rounds_ms and torch_sides:
        best = min(torch_sides, key=lambda n: out[f"same_process_{n}_ms"])
        out.update(same_process_backend=best, same_process_rounds=rounds, same_process_iters=iters,
                   sdpa_over_library=out[f"same_process_{best}_ms"] / out["same_process_library_ms"])
    return out


def resolved(name: str, world: int) -> str:
    """The shape a row runs: the Llama-3-8B shapes hold 8192 tokens per rank (S = 8192 x W, as the torch ring
    anchor and the issue's goals read them); every other name as it is."""
    from cuco.workloads.attention_cp import shapes as cp_shapes

    if name in ("llama3-8b", "llama3-8b-full"):
        dims = (cp_shapes.LLAMA_TOKENS_PER_RANK * world, *cp_shapes.NAMED[name].dims[1:])
        return ",".join(map(str, dims))
    return name


def run_shape(name: str, evals: int, runs: Path, world: int, library: Path | None) -> dict[str, Any]:
    text = resolved(name, world)
    row = search_row("attention_cp", text, world, evals, runs)
    row.update(shape=name, ran_shape=text)
    if world > 1:  # SDPA on the whole sequence is not the ring's anchor (SDPA per ring step with send/recv is)
        row["anchor_note"] = "no torch anchor at W > 1 in this script"
        return row
    try:
        row.update(anchor(row["dims"]))
        if row.get("anchor_ms") and row.get("compute_ms"):
            row["anchor_over_compute"] = row["anchor_ms"] / row["compute_ms"]
    except Exception as exc:  # the cuco figures stand without the anchor
        row["anchor_error"] = repr(exc)
    if library is None:
        row["same_process_error"] = "the compute library did not build"
        return row
    try:
        row.update(same_process(row["dims"], library))
    except Exception as exc:
        row["same_process_error"] = repr(exc)
    return row


def main() -> None:
    from cuco.workloads import get

    w = get("attention_cp")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="s4096-d32,s8192-d64,llama3-8b,s8192-d32,s4096-d64,llama3-8b-full")
    ap.add_argument("--evals", type=int, default=6)
    ap.add_argument("--runs", default="/tmp/cuco-attention-cp-runs")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--world", type=int, default=1, help="ranks = GPUs")
    ap.add_argument("--torch-json", default=None, help="output of benchmarks/torch_ring_attention.py (W > 1)")
    a = ap.parse_args()
    shapes = [s for s in a.shapes.split(",") if s]
    for s in shapes:  # bad names and shapes fail here, before anything builds
        w.check_shape(w.parse_shape(resolved(s, a.world)), a.world)
    out = Path(a.out)
    anchors = torch_rows(a.torch_json)
    meta = open_meta(out / f"attention_cp_w{a.world}.json", a.world)  # rows of other shapes from earlier calls stay
    meta.update(date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=machine(a.world))
    try:
        from cuco.kit.compute import build_compute
        from cuco.toolchain import default_toolchain

        built = build_compute(w, default_toolchain())
        library = built.library
        meta["compute_library"] = {"cached": built.cached, "build_s": round(built.seconds, 1)}
    except Exception as exc:
        library = None
        meta["errors"].append({"shape": "compute library", "error": repr(exc)})
    for name in shapes:
        try:
            row = run_shape(name, a.evals, Path(a.runs), a.world, library)
            merge_torch(row, anchors.get(name), "torch_ring_ms")
            put_row(meta, row)
        except Exception as exc:  # one shape's failure must not lose the others
            put_error(meta, name, repr(exc), traceback.format_exc())
        _write(out, meta)


def _write(out: Path, meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tag = f"attention_cp_w{meta['world']}"
    meta = save_meta(out / f"{tag}.json", meta)  # merged with rows another lane wrote meanwhile
    rows = meta["rows"]
    env = newest_row(rows)
    lines = [f"# Ring attention, world {meta['world']} — {env.get('device', '?')}, "
             f"NCCL {env.get('nccl_version', '?')}, CUDA runtime {env.get('cuda_runtime_version', '?')}, "
             f"torch {env.get('torch', '?')}, {meta['date']}",
             "", "| shape | verified | host | fast path | best (cuco) | speedup | compute library | comm | "
             "torch ring | torch SDPA (backend) | anchor/compute | "
             "one process: library, SDPA (backend), SDPA/library | best point |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        backend = f" ({r['anchor_backend']})" if r.get("anchor_backend") else ""
        ring = f" ({r['torch_ring_backend']})" if r.get("torch_ring_backend") else ""
        if r.get("torch_ring_compute_ms") is not None:  # the anchor's breakdown, where it was measured
            ring += (f"; compute chain {fmt(r['torch_ring_compute_ms'])}, sends alone "
                     f"{fmt(r.get('torch_ring_comm_ms'))}")
        ran = f" (S={r['ran_shape'].split(',')[0]})" if r.get("ran_shape", r["shape"]) != r["shape"] else ""
        one = "—"
        if r.get("sdpa_over_library") is not None:
            sb = r["same_process_backend"]
            one = (f"{fmt(r['same_process_library_ms'])}, {fmt(r[f'same_process_{sb}_ms'])} ({sb}), "
                   f"{fmt(r['sdpa_over_library'], 2)}")
        lines.append(f"| {r['shape']}{ran} | {r.get('verified', False)} | {fmt(r.get('host_ms'))} | "
                     f"{fmt(r.get('fastpath_ms'))} | {fmt(r.get('best_ms'))} | {fmt(r.get('speedup'))} | "
                     f"{fmt(r.get('compute_ms'))} | {fmt(r.get('comm_ms'))} | {fmt(r.get('torch_ring_ms'))}{ring} | "
                     f"{fmt(r.get('anchor_ms'))}{backend} | {fmt(r.get('anchor_over_compute'), 2)} | {one} | "
                     f"`{r.get('best_point', '—')}` |")
    for e in meta["errors"]:
        lines.append(f"\nError ({e.get('shape')}): {e['error']}")
    lines += ["", "Times in ms. Host, fast path, best and the compute library's attention alone (the harness's "
              "'compute' part) come from one harness process per shape (median of the timed iterations); torch's "
              "scaled_dot_product_attention on the same shape, flash and cuDNN backends, the faster one shown, in the "
              "same device session (W = 1). One process (W = 1): the compute library's attention (its one FMHA call) "
              "through ctypes and torch SDPA in this script's process, 7 interleaved rounds of 20 calls, the median "
              "of the rounds' medians: the like-for-like ratio. torch ring (W > 1): "
              "benchmarks/torch_ring_attention.py — SDPA per ring "
              "step, batch_isend_irecv of the next K/V block, log-sum-exp merge, zigzag for causal — on the same "
              "machine in the same device call. A torch ring several times slower than cuco's host-driven ring on "
              "the same shape (W = 4: 1.07 against 0.34 ms at s8192-d64, 1.47 against 0.13 ms at s4096-d32) is a "
              "measurement still to explain, not a result: the attention alone takes about 0.1 to 0.3 ms there, so the "
              "rest is the eager ring's per-step work (W steps of SDPA, batch_isend_irecv and merge ops, each launched "
              "from the host). Rows measured since the anchor times its two chains apart say so in the torch ring "
              "column: the same ring with no block sent (its compute chain: SDPA, KV-head repeats and fp32 merges) "
              "and the blocks passed round with nothing attended (its sends alone).", ""]
    (out / f"{tag}.md").write_text("\n".join(lines + record_lines(meta)))


if __name__ == "__main__":
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    main()
