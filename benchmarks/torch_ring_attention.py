"""Torch anchor of ring attention (context parallelism): the algorithm of ring-flash-attention written with torch
ops — per ring step, SDPA of the local queries against the KV block in hand (flash or cuDNN, whichever is faster
for the shape, both returning the log-sum-exp), `batch_isend_irecv` of that block to the next rank meanwhile, and a
log-sum-exp merge; causal attention uses the zigzag layout (rank r holds chunks r and 2W-1-r of 2W), full
attention contiguous blocks. What a user without cuco would run.

    python -m torch.distributed.run --nproc_per_node 4 benchmarks/torch_ring_attention.py OUT.json \
        [--shapes llama3-8b,s8192-d64]

Shapes are attention_cp's (S total tokens, HQ, HKV, D, CAUSAL); inputs are randn bf16. Times are medians of
CUDA-event timings (warm-up first), max over ranks, in ms (`torch_ring_ms`). Each shape is also checked against
single-GPU SDPA on the whole sequence at a small size of the same heads (`check_rel_err`). GQA: KV heads are
repeated per step (torch's LSE-returning SDPA ops take equal head counts).
"""

from __future__ import annotations

from typing import Any


def zigzag_rows(s_total: int, world: int, rank: int, causal: bool) -> list[tuple[int, int]]:
    """Global token ranges [a, b) a rank holds, in local order: chunks r and 2W-1-r (causal) or block r (full)."""
    if not causal:
        n = s_total // world
        return [(rank * n, (rank + 1) * n)]
    c = s_total // (2 * world)
    return [(rank * c, (rank + 1) * c), ((2 * world - 1 - rank) * c, (2 * world - rank) * c)]


def attend(torch: Any, q, k, v, causal: bool, backend: str = "auto"):
    """(out, lse) of softmax(q k^T / sqrt(d)) v, [B, H, S, D] layouts (KV heads repeated to H), lse fp32 [B, H, S]."""
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    if q.device.type != "cuda":
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal)[:2]
        return out, lse.float()
    if backend == "cudnn":
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
        return r[0], r[1].float().reshape(q.shape[0], q.shape[1], q.shape[2])
    r = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)
    return r[0], r[1].float()


def merge(torch: Any, o, lse, o_b, lse_b):
    """Fold partial (o_b, lse_b) into (o, lse): o in fp32, [B, H, S, D]; lse [B, H, S]."""
    if o is None:
        return o_b.float(), lse_b
    new = torch.logaddexp(lse, lse_b)
    o = o * torch.exp(lse - new).unsqueeze(-1) + o_b.float() * torch.exp(lse_b - new).unsqueeze(-1)
    return o, new


def ring_attention(torch: Any, dist: Any, q, kv, causal: bool, backend: str = "auto", send: bool = True,
                   attend_blocks: bool = True):
    """This rank's attention output (fp32) and LSE over the whole sequence. q [B, HQ, Sr, D] and kv (k, v) are this
    rank's rows in the layout of `zigzag_rows`; the KV block travels the ring while the block in hand is used.
    For the breakdown of its time: send=False keeps the local block at every step (the compute chain alone, same
    kernels), attend_blocks=False only passes the blocks round (the communication chain alone; returns None)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    k, v = kv
    half = q.shape[2] // 2
    o = lse = None
    for step in range(world):
        src = (rank - step) % world  # without sends the block in hand stays the local one, of the same size
        send_now = send and step + 1 < world
        if send_now:  # the next block travels while this one is used
            nk, nv = torch.empty_like(k), torch.empty_like(v)
            ops = [dist.P2POp(dist.isend, t, (rank + 1) % world) for t in (k, v)]
            ops += [dist.P2POp(dist.irecv, t, (rank - 1) % world) for t in (nk, nv)]
            reqs = dist.batch_isend_irecv(ops)
        if not attend_blocks:
            pass
        elif not causal:
            o, lse = merge(torch, o, lse, *attend(torch, q, k, v, False, backend))
        elif src == rank:  # local rows in global order: the local causal mask is the global one
            o, lse = merge(torch, o, lse, *attend(torch, q, k, v, True, backend))
        elif src < rank:  # src's first chunk precedes both of ours; its second follows both
            o, lse = merge(torch, o, lse, *attend(torch, q, k[:, :, :half], v[:, :, :half], False, backend))
        else:  # src > rank: both of src's chunks precede our second chunk and follow our first
            o2, l2 = attend(torch, q[:, :, half:], k, v, False, backend)
            ob, lb = merge(torch, o[:, :, half:], lse[:, :, half:], o2, l2)  # step 0 (src == rank) set o and lse
            o, lse = o.clone(), lse.clone()
            o[:, :, half:], lse[:, :, half:] = ob, lb
        if send_now:
            for r in reqs:
                r.wait()
            k, v = nk, nv
    return o, lse


def local_inputs(torch: Any, dims: tuple[int, ...], rank: int, world: int, device: Any, dtype: Any, seed: int = 0):
    """Global randn Q, K, V (same on every rank from `seed`) and this rank's rows of them, [1, H, S, D]."""
    s, hq, hkv, d, causal = dims
    gen = torch.Generator().manual_seed(seed)
    full = [torch.randn(1, h, s, d, generator=gen).to(dtype) for h in (hq, hkv, hkv)]
    rows = zigzag_rows(s, world, rank, bool(causal))
    mine = [torch.cat([t[:, :, a:b] for a, b in rows], dim=2).to(device) for t in full]
    return full, mine


def check(torch: Any, dist: Any, dims: tuple[int, ...], device: Any, dtype: Any, backend: str) -> float:
    """Max relative error (max |O - O_ref| / max |O_ref|, over ranks) of the ring against whole-sequence attention."""
    rank, world = dist.get_rank(), dist.get_world_size()
    full, (q, k, v) = local_inputs(torch, dims, rank, world, device, dtype)
    o, _ = ring_attention(torch, dist, q, (k, v), bool(dims[4]), backend)
    qf, kf, vf = (t.float() for t in full)
    ref, _ = attend(torch, qf, kf, vf, bool(dims[4]))
    rows = zigzag_rows(dims[0], world, rank, bool(dims[4]))
    ref_mine = torch.cat([ref[:, :, a:b] for a, b in rows], dim=2).to(o.device)
    err = torch.tensor([float((o - ref_mine).abs().max() / ref.abs().max())], device=device)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    return float(err.item())


def measure(torch: Any, dist: Any, name: str, world: int, dev: Any) -> dict[str, Any]:
    """One shape's row: the ring timed with flash and with cuDNN (max over ranks), the faster as `torch_ring_ms`,
    checked at a small size of the same heads."""
    from torch_anchor import _median_ms

    from cuco.workloads.attention_cp import shapes as cp_shapes

    dims = cp_shapes.parse(name).dims
    if name.startswith("llama3"):  # 8192 tokens per rank, as attention_cp's bench_for(world)
        dims = (cp_shapes.LLAMA_TOKENS_PER_RANK * world, *dims[1:])
    cp_shapes.check(cp_shapes.Shape(dims), world)
    _, (q, k, v) = local_inputs(torch, dims, dist.get_rank(), world, dev, torch.bfloat16)
    row: dict[str, Any] = {"shape": name, "dims": list(dims), "world": world}
    for backend in ("flash", "cudnn"):
        try:
            row[f"torch_ring_{backend}_ms"] = _median_ms(
                torch, dist, lambda: ring_attention(torch, dist, q, (k, v), bool(dims[4]), backend))
        except RuntimeError as exc:  # a backend that does not take this shape
            row[f"torch_ring_{backend}_error"] = str(exc)[:300]
    timed = {b: row[f"torch_ring_{b}_ms"] for b in ("flash", "cudnn") if f"torch_ring_{b}_ms" in row}
    if timed:
        best = min(timed, key=timed.get)
        row.update(torch_ring_ms=timed[best], torch_ring_backend=best)
        # where the ring's time goes: the same compute chain without sends, and the sends alone
        row["torch_ring_compute_ms"] = _median_ms(
            torch, dist, lambda: ring_attention(torch, dist, q, (k, v), bool(dims[4]), best, send=False))
        row["torch_ring_comm_ms"] = _median_ms(
            torch, dist, lambda: ring_attention(torch, dist, q, (k, v), bool(dims[4]), best, attend_blocks=False))
        row["check_rel_err"] = check(torch, dist, (2 * world * 128, *dims[1:]), dev, torch.bfloat16, best)
    return row


if __name__ == "__main__":
    from torch_shapes_run import run_over_shapes

    run_over_shapes(__doc__.splitlines()[0], "s4096-d32,s8192-d32,s4096-d64,s8192-d64,llama3-8b,llama3-8b-full",
                    measure)
