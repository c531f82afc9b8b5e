"""Ring attention's compute at W ranks against the same attention once a rank holds every token's K/V, on one GPU.

    python benchmarks/attention_gather_compute.py [--lib path/to/libattention_cp_compute.so] \
        [--shapes s8192-d64@4,...] [--json out.json]

A ring passes KV blocks round and attends to one block per step: W FMHA calls (causal zigzag: W + 1, the own block
cut at its diagonal) each writing an fp32 partial, W - 1 log-sum-exp merges into an fp32 running output, one rounding
to bf16. A rank that gathers every peer's block at once (device-initiated pulls from all peers, not only the next
neighbour) can lay the K/V out in global token order; then each zigzag chunk of its queries is ONE call against the
whole key prefix before it, the causal mask aligned bottom-right (`cuco_attn_suffix_bf16`), with nothing to merge:
two calls for causal, one for full attention.

Between the two, `hybrid`: the ring's own-block step first (nothing to wait for), then the other ranks' K/V,
gathered into one region, in at most two calls and two merges whatever W (hybrid_calls), all with the functions
the ring already uses; the own block's attention can run while the rest is pulled.

And `waiting`: the gathered calls as the `fused` point makes them (`cuco_attn_suffix_wait_bf16`: each KV tile
waits for its source's flag inside the kernel, persistent on all SMs but the pulls' COMM_CTAS), every flag already
up: what the waits and the SM cap cost when nothing is late (waiting_over_gathered), apart: cap_cost (capped against
every SM), wait_cost (flags against none, every SM), persistent_cost (no flags, every SM, against `gathered`'s
cooperative calls); and `waiting_fit`, the waiting calls on the fewest CTAs that keep the capped call's waves
(fit_ctas; the fused point now leaves the SMs it saves to the pulls), with each launch's waves.

This times all four for rank `me` of a shape at world W, on one GPU (no communication: the compute side alone), with
torch SDPA over the whole sequence in the same process (its time / W is a rank's share of the work), and checks both
outputs against SDPA's rows of rank `me` (max |O - O_sdpa| / max |O_sdpa|). Interleaved rounds of event-timed calls;
medians. Without --lib it builds (or finds cached) the ring-attention compute library of this tree.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
from typing import Any, NamedTuple

from cuco.workloads.attention_cp import shapes

#: GPU cycles (about a millisecond) each timed call waits behind, so the host enqueues all of its launches (through
#: ctypes: microseconds each) before its start event; else host gaps between launches would be timed, and they grow
#: with the number of launches, which differs between the forms.
HOLD_CYCLES = 2_000_000
DEFAULT = "s4096-d32@2,s8192-d64@2,s4096-d32@4,s4096-d64@4,s8192-d32@4,s8192-d64@4,llama3-8b@4,llama3-8b-full@4"
KV_TILE = 128


class Call(NamedTuple):
    """One FMHA call: local query rows [q0, q0 + nq) against keys [k0, k0 + nk) of `src`'s block (ring), or of the
    whole sequence in global order (src -1: gathered); mask 'none', 'causal' (top-left, square) or 'suffix'
    (bottom-right); merged: an fp32 partial merged into the running output (else written directly)."""

    q0: int
    nq: int
    src: int
    k0: int
    nk: int
    mask: str
    merged: bool


def geometry(s: int, world: int, causal: bool) -> tuple[int, int]:
    """(tokens per rank, zigzag chunk) of S tokens over `world` ranks; ValueError where the chunks do not fall on
    KV tiles."""
    sr = s // world
    half = sr // 2
    if s % world or (causal and (sr % 2 or half % KV_TILE)) or (not causal and sr % KV_TILE):
        raise ValueError(f"S={s} at W={world}: each rank's {'zigzag chunk' if causal else 'block'} must be a multiple "
                         f"of {KV_TILE} tokens")
    return sr, half


def global_row(world: int, me: int, i: int, sr: int, half: int, causal: bool) -> int:
    """Global token of rank `me`'s local row i (zigzag for causal: chunks me and 2W-1-me)."""
    if not causal:
        return me * sr + i
    return me * half + i if i < half else (2 * world - 1 - me) * half + (i - half)


def ring_calls(world: int, me: int, sr: int, half: int, causal: bool) -> list[Call]:
    """The ring's calls at rank `me`, step by step (attention_cp.h: pieces, ring_step): step 0 its own block,
    written directly; step s the block of rank (me - s) mod W, merged."""
    out: list[Call] = []
    for step in range(world):
        src = (me - step) % world
        merged = step > 0
        if not causal:
            out.append(Call(0, sr, src, 0, sr, "none", merged))
        elif src == me:
            out += [Call(0, sr, src, 0, sr, "causal", merged)]
        elif src < me:   # src's first chunk precedes both of me's chunks; its second follows both
            out.append(Call(0, sr, src, 0, half, "none", merged))
        else:            # src's chunks both follow me's first chunk and precede me's second one
            out.append(Call(half, half, src, 0, sr, "none", merged))
    return out


def gathered_calls(world: int, me: int, sr: int, half: int, causal: bool) -> list[Call]:
    """The calls at rank `me` holding every token's K/V in global order: per zigzag chunk of its queries one call
    against the key prefix up to its last token (bottom-right causal); full attention: one call against all."""
    if not causal:
        return [Call(0, sr, -1, 0, world * sr, "none", False)]
    return [Call(0, half, -1, 0, (me + 1) * half, "suffix", False),
            Call(half, half, -1, 0, (2 * world - me) * half, "suffix", False)]


def remote_chunks(world: int, me: int) -> list[int]:
    """The zigzag chunks of other ranks that rank `me`'s causal queries can see, in global order: the lower ones
    (0 .. me-1, visible to all its queries), then the upper ones (me+1 .. 2W-2-me, visible to its second chunk only);
    the chunks after its second chunk are seen by none. The layout a gathering rank pulls them into."""
    return [c for c in range(2 * world - 1 - me) if c != me]


def hybrid_calls(world: int, me: int, sr: int, half: int, causal: bool) -> list[Call]:
    """The ring's first step on the own block (nothing to wait for, written directly), then the other ranks' K/V
    gathered into one region (src -2: `remote_chunks` order for causal, ranks' blocks in rank order without its own
    for full) in at most two calls, merged: all queries against the lower chunks, the second chunk's queries against
    the upper ones. Calls and merges no longer grow with W, and the own block's attention can run while the rest
    is pulled from every peer at once."""
    own = Call(0, sr, me, 0, sr, "causal" if causal else "none", False)
    if not causal:
        return [own, Call(0, sr, -2, 0, (world - 1) * sr, "none", True)]
    lower, upper = me * half, (2 * world - 2 - 2 * me) * half
    return [own] + ([Call(0, sr, -2, 0, lower, "none", True)] if lower else []) + \
        ([Call(half, half, -2, lower, upper, "none", True)] if upper else [])


def _remote_key(world: int, me: int, j: int, sr: int, half: int, causal: bool) -> int:
    """Global token of row j of the gathered remote region (hybrid_calls' src -2)."""
    if causal:
        return remote_chunks(world, me)[j // half] * half + j % half
    r = j // sr
    return (r + (r >= me)) * sr + j % sr


def visible_pairs(calls: list[Call], world: int, me: int, sr: int, half: int, causal: bool) -> list[tuple[int, int]]:
    """Every (global query, global key) pair the calls attend, with repeats: what a test holds against the mask."""
    pairs = []
    for c in calls:
        for i in range(c.q0, c.q0 + c.nq):
            for j in range(c.k0, c.k0 + c.nk):
                if c.mask == "causal" and j > i:
                    continue
                if c.mask == "suffix" and j > (i - c.q0) + (c.nk - c.nq):
                    continue
                key = (j if c.src == -1 else _remote_key(world, me, j, sr, half, causal) if c.src == -2
                       else global_row(world, c.src, j, sr, half, causal))
                pairs.append((global_row(world, me, i, sr, half, causal), key))
    return pairs


#: SMs the pulls keep beside the waiting FMHA (the candidates' kCommCtas): it runs persistent on the rest.
COMM_CTAS = 16


def waves(tiles: int, ctas: int) -> int:
    """Waves of a persistent call of `tiles` work tiles on `ctas` CTAs."""
    return -(-tiles // ctas)


def tiles(half: int, hq: int) -> int:
    """Work tiles of one zigzag chunk's call: 128 query rows by one query head each."""
    return -(-half // 128) * hq


def fit_ctas(half: int, hq: int, sm_count: int, min_free: int = COMM_CTAS) -> int:
    """The waiting calls' CTAs as the fused point takes them (mirrors cuco_attn::fused_fmha_ctas, causal): the fewest
    that give the waves of sm_count - min_free; the pulls take the rest."""
    t, cap = tiles(half, hq), max(1, sm_count - min_free)
    return -(-t // waves(t, cap))


class Arrival(ctypes.Structure):
    """cuco_attn_arrival (attention_cp.h)."""
    _fields_ = [("flag0", ctypes.c_void_p), ("epoch_at", ctypes.c_void_p), ("src_stride", ctypes.c_int64),
                ("chunk_rows", ctypes.c_int64), ("row0", ctypes.c_int64), ("world", ctypes.c_int),
                ("zigzag", ctypes.c_int)]


def load_library(path: str | None = None) -> ctypes.CDLL:
    """The ring-attention compute library at `path`, or built (or found cached) from this tree, its functions
    typed."""
    if path is None:
        from cuco import workloads
        from cuco.kit.compute import build_compute
        from cuco.toolchain import default_toolchain

        path = str(build_compute(workloads.get("attention_cp"), default_toolchain()).library)
    lib = ctypes.CDLL(path)
    vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
    for name in ("cuco_attn_block_f32", "cuco_attn_block_bf16"):
        getattr(lib, name).argtypes = [vp] * 5 + [i64] * 2 + [i32] * 3 + [i64, i32, vp]
    lib.cuco_attn_suffix_bf16.argtypes = [vp] * 5 + [i64] * 2 + [i32] * 3 + [i64, vp]
    lib.cuco_attn_suffix_wait_bf16.argtypes = [vp] * 5 + [i64] * 2 + [i32] * 3 + [i64, vp, i32, vp]
    lib.cuco_attn_merge_f32.argtypes = [vp, vp, vp, vp, i64, i32, i32, i64, vp]
    lib.cuco_attn_finish_f32.argtypes = [vp, vp, i64, i32, i32, vp]
    return lib


def dims_at(name: str, world: int) -> tuple[int, ...]:
    """The dims of `name` as the benchmarks run it at `world`: the Llama rows at 8192 tokens per rank."""
    dims = tuple(shapes.parse(name).dims)
    if name.startswith("llama3-8b"):
        dims = (shapes.LLAMA_TOKENS_PER_RANK * world, *dims[1:])
    return dims


def measure(lib: ctypes.CDLL, name: str, world: int, me: int, rounds: int, iters: int) -> dict[str, Any]:
    """Both schedules' compute at rank `me` of `name` at `world`, timed and checked on this GPU."""
    import torch

    from event_timing import event_times_ms

    s, hq, hkv, d, causal = dims_at(name, world)
    causal = bool(causal)
    sr, half = geometry(s, world, causal)
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(7)
    q, k, v = (torch.randn(s, h, d, device=dev, generator=gen).bfloat16() for h in (hq, hkv, hkv))
    rows = torch.tensor([global_row(world, me, i, sr, half, causal) for i in range(sr)], device=dev)
    q_me = q[rows].contiguous()
    blocks = [torch.cat([k[[global_row(world, r, i, sr, half, causal) for i in range(sr)]],
                         v[[global_row(world, r, i, sr, half, causal) for i in range(sr)]]]).contiguous()
              for r in range(world)]   # each rank's KV block: its K rows, then its V rows (attention_cp.h)
    plans = {"ring": ring_calls(world, me, sr, half, causal), "gathered": gathered_calls(world, me, sr, half, causal),
             "hybrid": hybrid_calls(world, me, sr, half, causal)}
    remote = [_remote_key(world, me, j, sr, half, causal)
              for j in range(sum(c.nk for c in plans["hybrid"] if c.src == -2))]
    # the other ranks' K/V a gathering rank holds (hybrid_calls' src -2): K rows, then V rows, as a block
    region = torch.cat([k[remote], v[remote]]).contiguous() if remote else blocks[me]
    kv_at = {**{r: (blocks[r], sr) for r in range(world)}, -2: (region, len(remote))}   # base, rows before V
    o_ring, o_gather, o_hybrid = (torch.empty(sr, hq, d, device=dev, dtype=torch.bfloat16) for _ in range(3))
    run32 = torch.empty(sr, hq, d, device=dev)
    part = torch.empty(sr, hq, d, device=dev)
    lse, lse_part, lse_g = (torch.empty(hq, sr, device=dev) for _ in range(3))
    stream = lambda: ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)   # noqa: E731
    ptr = lambda t, off=0: ctypes.c_void_p(t.data_ptr() + off * t.element_size())   # noqa: E731
    qe, ke = hq * d, hkv * d

    def merged(calls: list[Call], o: Any) -> None:
        """Calls each writing an fp32 partial (the first ones directly), merged, then rounded once."""
        for c in calls:
            blk, v_rows = kv_at[c.src]
            kb, vb = ptr(blk, c.k0 * ke), ptr(blk, (v_rows + c.k0) * ke)
            out, ls = (part, lse_part) if c.merged else (run32, lse)
            rc = lib.cuco_attn_block_f32(ptr(q_me, c.q0 * qe), kb, vb, ptr(out, c.q0 * qe), ptr(ls, c.q0), c.nq,
                                         c.nk, hq, hkv, d, sr, int(c.mask == "causal"), stream())
            if not rc and c.merged:
                rc = lib.cuco_attn_merge_f32(ptr(run32, c.q0 * qe), ptr(lse, c.q0), ptr(part, c.q0 * qe),
                                             ptr(lse_part, c.q0), c.nq, hq, d, sr, stream())
            if rc:
                raise RuntimeError(f"call {c}: status {rc}")
        if lib.cuco_attn_finish_f32(ptr(o), ptr(run32), sr, hq, d, stream()):
            raise RuntimeError("cuco_attn_finish_f32 failed")

    def ring() -> None:
        merged(plans["ring"], o_ring)

    def hybrid() -> None:
        merged(plans["hybrid"], o_hybrid)

    # the waiting form's flags, all up: what its in-kernel waits and its SM cap cost when nothing is late
    flags, epoch = torch.ones(world, device=dev, dtype=torch.int32), torch.ones(1, device=dev, dtype=torch.int32)
    arrival = Arrival(flags.data_ptr(), epoch.data_ptr(), 1, half if causal else sr, 0, world, int(causal))
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    capped = sms - COMM_CTAS

    def gathered(o_gather: Any = o_gather, wait: tuple[Any, int] | None = None) -> None:
        """The gathered calls; wait = (arrival or None, SM cap): the suffix calls through the waiting FMHA."""
        for c in plans["gathered"]:
            args = (ptr(q_me, c.q0 * qe), ptr(k, c.k0 * ke), ptr(v, c.k0 * ke), ptr(o_gather, c.q0 * qe),
                    ptr(lse_g, c.q0), c.nq, c.nk, hq, hkv, d, sr)
            if c.mask == "suffix" and wait is not None:
                rc = lib.cuco_attn_suffix_wait_bf16(*args, wait[0], wait[1], stream())
            elif c.mask == "suffix":
                rc = lib.cuco_attn_suffix_bf16(*args, stream())
            else:   # full attention: the cooperative fp32 call (as the ring's), rounded once
                rc = lib.cuco_attn_block_f32(*args[:3], ptr(run32), *args[4:], 0, stream()) or \
                    lib.cuco_attn_finish_f32(ptr(o_gather), ptr(run32), sr, hq, d, stream())
            if rc:
                raise RuntimeError(f"gathered call {c}: status {rc}")

    def sdpa() -> Any:
        qt, kt, vt = (t.transpose(0, 1)[None] for t in (q, k, v))
        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                                enable_gqa=hq != hkv)[0].transpose(0, 1)

    # the waiting FMHA four ways, to tell its costs apart: as the fused point ran it (flags up, SMs capped); on
    # every SM (the cap's cost); on every SM with no flags (the in-kernel waits' cost; against `gathered`: the
    # persistent scheduler's); on the fitted CTAs (as the fused point runs it now)
    fit = fit_ctas(half, hq, sms) if causal else capped
    waits = {"waiting": (ctypes.byref(arrival), capped), "waiting_all_sms": (ctypes.byref(arrival), 0),
             "waiting_no_flags": (None, 0), "waiting_fit": (ctypes.byref(arrival), fit)}
    o_wait = {n: torch.empty_like(o_gather) for n in waits}
    wait_fns = {n: (lambda n=n: gathered(o_wait[n], waits[n])) for n in waits}

    want = sdpa()[rows].float()
    ring(), gathered(), hybrid(), *(f() for f in wait_fns.values())
    torch.cuda.synchronize()
    scale = want.abs().max().item()
    err = {f"{n}_err": (o.float() - want).abs().max().item() / scale
           for n, o in (("ring", o_ring), ("gathered", o_gather), ("hybrid", o_hybrid), *o_wait.items())}
    fns = {"ring": ring, "gathered": gathered, "hybrid": hybrid, **wait_fns, "sdpa_whole": sdpa}
    times: dict[str, list[float]] = {n: [] for n in fns}
    for r in range(rounds):   # interleaved, the order turned each round
        order = list(times) if r % 2 == 0 else list(times)[::-1]
        for n in order:
            fn = fns[n]
            times[n].append(statistics.median(event_times_ms(fn, iters, 3,
                                                             before=lambda: torch.cuda._sleep(HOLD_CYCLES))))
    med = {f"{n}_ms": statistics.median(t) for n, t in times.items()}
    spread = {f"{n}_spread": (max(t) - min(t)) / statistics.median(t) for n, t in times.items()}
    share = med["sdpa_whole_ms"] / world
    return {"shape": name, "world": world, "rank": me, "S": s, "HQ": hq, "HKV": hkv, "D": d, "causal": causal,
            **{f"{n}_calls": len(c) for n, c in plans.items()}, **med, **spread, **err,
            "sdpa_share_ms": share, "gathered_over_ring": med["gathered_ms"] / med["ring_ms"],
            "hybrid_over_ring": med["hybrid_ms"] / med["ring_ms"],
            "waiting_over_gathered": med["waiting_ms"] / med["gathered_ms"], "waiting_sms": capped,
            "cap_cost": med["waiting_ms"] / med["waiting_all_sms_ms"],
            "wait_cost": med["waiting_all_sms_ms"] / med["waiting_no_flags_ms"],
            "persistent_cost": med["waiting_no_flags_ms"] / med["gathered_ms"],
            "fit_ctas": fit, "fit_over_capped": med["waiting_fit_ms"] / med["waiting_ms"],
            "fit_over_gathered": med["waiting_fit_ms"] / med["gathered_ms"],
            **({f"waves_{n}": waves(tiles(half, hq), c) for n, c in (("capped", capped), ("fit", fit),
                                                                       ("all_sms", sms))} if causal else {}),
            "ring_over_share": med["ring_ms"] / share, "gathered_over_share": med["gathered_ms"] / share}


def parse_points(text: str) -> list[tuple[str, int]]:
    """--shapes: name@W, comma-separated; refused before any GPU work where a shape or W cannot run."""
    out = []
    for word in (w.strip() for w in text.split(",") if w.strip()):
        name, _, w = word.partition("@")
        if not w.isdigit() or int(w) < 2:
            raise argparse.ArgumentTypeError(f"{word!r}: name each shape as NAME@W with W >= 2, e.g. s8192-d64@4")
        try:   # an unknown name (ShapeError is a ValueError) or chunks off the KV tiles
            dims = dims_at(name, int(w))
            geometry(dims[0], int(w), bool(dims[4]))
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{word!r}: {exc}") from None
        out.append((name, int(w)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", default=None)
    ap.add_argument("--shapes", type=parse_points, default=parse_points(DEFAULT))
    ap.add_argument("--ranks", default="0,last", help="ranks to time: numbers, or 'last'")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    from probe_rows import collect

    lib = load_library(a.lib)

    def ranks(world: int) -> list[int]:
        return sorted({world - 1 if w == "last" else int(w) for w in a.ranks.split(",")} & set(range(world)))

    collect((measure(lib, name, world, me, a.rounds, a.iters) for name, world in a.shapes for me in ranks(world)),
            a.json)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    raise SystemExit(main())
