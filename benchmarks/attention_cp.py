"""Ring attention at W ranks (--world, default 1; W = 1 is plain flash attention on one GPU), in one call: per shape
the host baseline, the fast-path candidate and the best point of an offline directive search (verified under delayed
arrival), the compute library's attention alone (the harness's "compute" part, same process as host and best), and
at W = 1 torch's scaled_dot_product_attention on the same shape and GPU, the faster of its flash and cuDNN backends.

    PYTHONPATH=src python3 benchmarks/attention_cp.py --out benchmarks/results [--evals 6] [--shapes s4096-d32,...]

Writes attention_cp_w<W>.json and attention_cp_w<W>.md under --out after every shape (a cut-off run keeps what it
measured). Every cuco time comes from the harness (CUDA events, median of the timed iterations); torch times are
CUDA-event medians of 30 calls after 5 warm-up calls (benchmarks/event_timing.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from record import machine, record_lines  # noqa: E402  (a sibling script)
from results_rows import merge_torch, open_meta, put_error, put_row, save_meta, torch_rows  # noqa: E402  (a sibling script)
from search_rows import fmt, search_row  # noqa: E402  (a sibling script)

RESULTS = HERE / "results"


def anchor(dims: dict[str, int]) -> dict[str, Any]:
    """torch SDPA (bf16, [1, H, S, D]) on this shape: each of the flash and cuDNN backends, and the faster."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from event_timing import event_times_ms

    s, hq, hkv, d, causal = (dims[k] for k in ("S", "HQ", "HKV", "D", "CAUSAL"))
    q = torch.randn(1, hq, s, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out: dict[str, Any] = {"torch": torch.__version__}
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def call():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=hq != hkv)

        try:
            out[f"anchor_{name}_ms"] = statistics.median(event_times_ms(call, iters=30, warmup=5))
        except RuntimeError as exc:  # a backend that does not take this shape
            out[f"anchor_{name}_error"] = str(exc)[:300]
    timed = {n: out[f"anchor_{n}_ms"] for n in ("flash", "cudnn") if f"anchor_{n}_ms" in out}
    if timed:
        best = min(timed, key=timed.get)
        out.update(anchor_ms=timed[best], anchor_backend=best)
    return out


def resolved(name: str, world: int) -> str:
    """The shape a row runs: the Llama-3-8B shapes hold 8192 tokens per rank (S = 8192 x W, as the torch ring
    anchor and the issue's goals read them); every other name as it is."""
    from cuco.workloads.attention_cp import shapes as cp_shapes

    if name in ("llama3-8b", "llama3-8b-full"):
        dims = (cp_shapes.LLAMA_TOKENS_PER_RANK * world, *cp_shapes.NAMED[name].dims[1:])
        return ",".join(map(str, dims))
    return name


def run_shape(name: str, evals: int, runs: Path, world: int) -> dict[str, Any]:
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
        meta["compute_library"] = {"cached": built.cached, "build_s": round(built.seconds, 1)}
    except Exception as exc:
        meta["errors"].append({"shape": "compute library", "error": repr(exc)})
    for name in shapes:
        try:
            row = run_shape(name, a.evals, Path(a.runs), a.world)
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
    env = next((r for r in rows if r.get("device")), {})
    lines = [f"# Ring attention, world {meta['world']} — {env.get('device', '?')}, "
             f"NCCL {env.get('nccl_version', '?')}, CUDA runtime {env.get('cuda_runtime_version', '?')}, "
             f"torch {env.get('torch', '?')}, {meta['date']}",
             "", "| shape | verified | host | fast path | best (cuco) | speedup | compute library | comm | "
             "torch ring | torch SDPA (backend) | anchor/compute | best point |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        backend = f" ({r['anchor_backend']})" if r.get("anchor_backend") else ""
        ring = f" ({r['torch_ring_backend']})" if r.get("torch_ring_backend") else ""
        if r.get("torch_ring_compute_ms") is not None:  # the anchor's breakdown, where it was measured
            ring += (f"; compute chain {fmt(r['torch_ring_compute_ms'])}, sends alone "
                     f"{fmt(r.get('torch_ring_comm_ms'))}")
        ran = f" (S={r['ran_shape'].split(',')[0]})" if r.get("ran_shape", r["shape"]) != r["shape"] else ""
        lines.append(f"| {r['shape']}{ran} | {r.get('verified', False)} | {fmt(r.get('host_ms'))} | "
                     f"{fmt(r.get('fastpath_ms'))} | {fmt(r.get('best_ms'))} | {fmt(r.get('speedup'))} | "
                     f"{fmt(r.get('compute_ms'))} | {fmt(r.get('comm_ms'))} | {fmt(r.get('torch_ring_ms'))}{ring} | "
                     f"{fmt(r.get('anchor_ms'))}{backend} | {fmt(r.get('anchor_over_compute'), 2)} | "
                     f"`{r.get('best_point', '—')}` |")
    for e in meta["errors"]:
        lines.append(f"\nError ({e.get('shape')}): {e['error']}")
    lines += ["", "Times in ms. Host, fast path, best and the compute library's attention alone (the harness's "
              "'compute' part) come from one harness process per shape (median of the timed iterations); torch's "
              "scaled_dot_product_attention on the same shape, flash and cuDNN backends, the faster one shown, in the "
              "same device session (W = 1). torch ring (W > 1): benchmarks/torch_ring_attention.py — SDPA per ring "
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
