"""Torch anchor of the whole MoE layer: what a user without cuco would run, with cuco's routing, rows and input
bytes. Per rank: the routed slots sorted by destination expert, the per-expert counts exchanged
(`all_to_all_single`) and read on the host (the split sizes need them), the rows dispatched (`all_to_all_single`),
regrouped expert-major, the local experts' SwiGLU FFN as a grouped GEMM (`torch._grouped_mm` on the GPU), the
rows sent back (`all_to_all_single`) and combined with the gates.

    python -m torch.distributed.run --nproc_per_node 4 benchmarks/torch_moe_layer.py OUT.json [--shapes dsv3-r3]

Shapes are moe's (T tokens per rank, H, I, E experts, top-K, skew R); routing is cuco's (routing.py, bit-identical
to the harness's, seed 1: the seed the harness times with); inputs randn bf16. Times: median of CUDA-event
timings after warm-up, max over ranks, in ms (`torch_layer_ms`), count exchange and host sync included; beside
it the exchange chain alone (`torch_layer_exchange_ms`: the FFN skipped) and the grouped FFN alone
(`torch_layer_ffn_ms`).
"""

from __future__ import annotations

import os
import sys
from typing import Any

ROUTING_SEED = 1


def swiglu(torch: Any, h):
    g, u = h.chunk(2, dim=-1)
    return torch.nn.functional.silu(g) * u


def expert_ffn(torch: Any, x, w1t, w2t, counts: list[int]):
    """SwiGLU FFN of rows grouped expert-major (`counts` rows per local expert); w1t [El, H, 2I], w2t [El, I, H]."""
    if x.device.type == "cuda":
        ends = torch.cumsum(torch.tensor(counts, device=x.device), 0).to(torch.int32)
        return torch._grouped_mm(swiglu(torch, torch._grouped_mm(x, w1t, offs=ends)), w2t, offs=ends)
    out, a = [], 0
    for e, n in enumerate(counts):  # the CPU has no grouped GEMM: one matmul per expert
        out.append(swiglu(torch, x[a:a + n] @ w1t[e]) @ w2t[e])
        a += n
    return torch.cat(out) if out else x.new_empty(0, w2t.shape[2])


class Layer:
    """One rank's MoE layer for fixed routing: the slot order and the local expert weights prepared once."""

    def __init__(self, torch: Any, dist: Any, experts, gates, w1t, w2t, n_experts: int):
        self.torch, self.dist = torch, dist
        self.world, self.el = dist.get_world_size(), n_experts // dist.get_world_size()
        t, k = experts.shape
        flat = experts.reshape(-1).long()
        self.order = torch.argsort(flat, stable=True)           # slots sorted by expert, hence by owner rank
        self.token = self.order // k                              # the token of each sorted slot
        self.gate = gates.reshape(-1)[self.order].unsqueeze(1)
        self.send_counts = torch.bincount(flat, minlength=n_experts)   # per destination expert
        self.w1t, self.w2t, self.tokens = w1t, w2t, t

    def __call__(self, x, ffn: bool = True):
        """The layer's output for x; ffn=False passes the received rows back untouched (the exchange chain alone,
        its count exchange and host sync included), for the breakdown of its time."""
        torch, dist, w, el = self.torch, self.dist, self.world, self.el
        recv_counts = torch.empty_like(self.send_counts)
        dist.all_to_all_single(recv_counts, self.send_counts)            # [source][local expert] after the swap
        got = recv_counts.view(w, el).tolist()                           # host sync: the split sizes need it
        sent = self.send_counts.view(w, el).sum(1).tolist()
        rows = x[self.token]
        recv = x.new_empty(sum(map(sum, got)), x.shape[1])
        dist.all_to_all_single(recv, rows, [sum(g) for g in got], sent)
        # source-major -> expert-major: the rows of local expert e from every source, in source order (a stable
        # sort of each received row's key e * W + src, on the device)
        seg = torch.arange(w * el, device=x.device)
        key = (seg % el) * w + seg // el
        perm = torch.argsort(torch.repeat_interleave(key, recv_counts.view(-1), output_size=recv.shape[0]),
                             stable=True)
        per_expert = [sum(got[src][e] for src in range(w)) for e in range(el)]
        self.received = (recv, perm, per_expert)   # what ffn_alone() computes on (references, no copy)
        if ffn:
            y = x.new_empty(recv.shape)
            y[perm] = expert_ffn(torch, recv[perm], self.w1t, self.w2t, per_expert).to(x.dtype)
        else:
            y = recv
        back = x.new_empty(rows.shape)
        dist.all_to_all_single(back, y, sent, [sum(g) for g in got])
        out = torch.zeros(self.tokens, x.shape[1], dtype=torch.float32, device=x.device)
        out.index_add_(0, self.token, back.float() * self.gate)
        return out

    def ffn_alone(self):
        """The expert-major regroup and the grouped SwiGLU FFN of the rows the last call received, nothing else."""
        recv, perm, per_expert = self.received
        return expert_ffn(self.torch, recv[perm], self.w1t, self.w2t, per_expert)


def expert_weights(torch: Any, e: int, h: int, i: int, device: Any, dtype: Any, seed: int = 0):
    """Expert e's (w1t [H, 2I], w2t [I, H]), randn scaled by 1/sqrt(fan-in), generated where they are used from a
    seed of (seed, e): every rank can rebuild any expert, and no rank ever holds all E of them (DeepSeek-V3's 256
    experts are 22 G values)."""
    gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + e)
    w1t = (torch.randn(h, 2 * i, generator=gen, device=device) / h ** 0.5).to(dtype)
    w2t = (torch.randn(i, h, generator=gen, device=device) / i ** 0.5).to(dtype)
    return w1t, w2t


def make(torch: Any, dist: Any, dims: tuple[int, ...], device: Any, dtype: Any, seed: int = 0):
    """This rank's layer and input (randn, seeded by rank), and its routing (for a reference)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    from cuco.workloads.moe import routing

    t, h, i, e, k, r = dims
    rank, world = dist.get_rank(), dist.get_world_size()
    el = e // world
    local = [expert_weights(torch, q, h, i, device, dtype, seed) for q in range(rank * el, (rank + 1) * el)]
    w1t, w2t = torch.stack([a for a, _ in local]), torch.stack([b for _, b in local])
    gen = torch.Generator(device=device).manual_seed(seed * 1_000_003 + 999_983 + rank)
    x = torch.randn(t, h, generator=gen, device=device).to(dtype)
    ex, gates = routing.route(routing.RoutingSpec(t, e, k, r), ROUTING_SEED, rank)
    layer = Layer(torch, dist, torch.from_numpy(ex).to(device), torch.from_numpy(gates).to(device), w1t, w2t, e)
    return layer, x, (ex, gates)


def check(torch: Any, dist: Any, dims: tuple[int, ...], device: Any, dtype: Any, seed: int = 0) -> float:
    """Max relative error (over ranks) of the layer against each token's gated sum of its experts' FFNs."""
    t, h, i, e, k, r = dims
    layer, x, (ex, gates) = make(torch, dist, dims, device, dtype, seed)
    out = layer(x).cpu()
    xr = x.float().cpu()
    weights = {q: tuple(w.float().cpu() for w in expert_weights(torch, q, h, i, device, dtype, seed))
               for q in sorted({int(q) for q in ex.reshape(-1)})}
    ref = torch.zeros_like(out)
    for tok in range(xr.shape[0]):
        for j in range(ex.shape[1]):
            w1, w2 = weights[int(ex[tok, j])]
            ref[tok] += float(gates[tok, j]) * (swiglu(torch, xr[tok] @ w1) @ w2)
    err = torch.tensor([float((out - ref).abs().max() / ref.abs().max())], device=device)
    dist.all_reduce(err, op=dist.ReduceOp.MAX)
    return float(err.item())


def measure(torch: Any, dist: Any, name: str, world: int, dev: Any) -> dict[str, Any]:
    """One shape's row: the layer timed (max over ranks) and checked at a small size with the same experts."""
    from torch_anchor import _median_ms

    from cuco.workloads.moe import shapes as moe_shapes

    shape = moe_shapes.parse(name)
    moe_shapes.check(shape, world)
    dims = shape.dims
    layer, x, _ = make(torch, dist, dims, dev, torch.bfloat16)
    row: dict[str, Any] = {"shape": name, "dims": list(dims), "world": world,
                           "torch_layer_ms": _median_ms(torch, dist, lambda: layer(x))}
    # where the layer's time goes: its exchange chain alone and its grouped FFN alone
    row["torch_layer_exchange_ms"] = _median_ms(torch, dist, lambda: layer(x, ffn=False))
    row["torch_layer_ffn_ms"] = _median_ms(torch, dist, layer.ffn_alone)   # on the rows the calls above received
    row["check_rel_err"] = check(torch, dist, (64, 256, 128, dims[3], dims[4], dims[5]), dev, torch.bfloat16)
    return row


if __name__ == "__main__":
    from torch_shapes_run import run_over_shapes

    run_over_shapes(__doc__.splitlines()[0], "paper-r1,paper-r2,paper-r3,paper-r4,paper-r5,dsv3-r3", measure)
