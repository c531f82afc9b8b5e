"""Torch anchor of KV-cache transfer (disaggregated prefill -> decode): what a user without cuco would run. Rank 2p
prefills a Llama-3-8B-like layer stack (the kv_transfer workload's: RMSNorm, QKV projection, causal GQA SDPA,
output projection with residual, RMSNorm, SwiGLU MLP with residual; one weight set for all layers); its decode rank
2p + 1 receives every layer's K and V and scatters them into its paged cache (16-token pages, a shuffled block
table). Two schedules: `layered` sends each layer's K/V (`dist.isend`) right after that layer's projection, so the
transfer runs under that layer's attention and MLP and the next layers; `after` sends all of them once the prefill
is done. `torch_kv_ms` is the faster.

    python -m torch.distributed.run --nproc_per_node 2 benchmarks/torch_kv_transfer.py OUT.json [--shapes s4096-kv1024]

Shapes are kv_transfer's (S tokens, KV width, L layers); inputs and weights randn bf16 (weights scaled by
1/sqrt(fan-in)). Times: median of CUDA-event timings after warm-up, max over ranks, ms.
"""

from __future__ import annotations

from typing import Any

HEAD_DIM, BLOCK = 128, 16


class Stack:
    """One prefill rank's layer stack and the K/V it produces, per layer [2, S, KV]."""

    def __init__(self, torch: Any, s: int, kv: int, layers: int, hidden: int, mlp: int, hq: int, device: Any,
                 dtype: Any, seed: int = 0):
        gen = torch.Generator().manual_seed(seed)
        self.torch, self.s, self.kv, self.layers, self.hq = torch, s, kv, layers, hq
        qw = hq * HEAD_DIM

        def w(i: int, o: int):
            return (torch.randn(i, o, generator=gen) / i ** 0.5).to(dtype).to(device)

        self.wqkv, self.wo, self.wgu, self.wd = w(hidden, qw + 2 * kv), w(qw, hidden), w(hidden, 2 * mlp), w(mlp, hidden)
        self.x0 = torch.randn(s, hidden, generator=gen).to(dtype).to(device)

    def rms(self, x):
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    def attention(self, q, k, v):
        """Causal GQA attention on a fused kernel only: the K/V heads repeated to the query heads (as a user would
        for the flash and cuDNN kernels), batch 1, and the math backend excluded, so a shape no fused kernel takes
        fails here instead of falling back to S x S scores in memory (which is what `enable_gqa` on 3-D inputs
        did: 18 ms a layer at S = 4096, out of memory at 32768)."""
        torch = self.torch
        from torch.nn.attention import SDPBackend, sdpa_kernel

        rep = q.shape[0] // k.shape[0]
        k, v = (t.repeat_interleave(rep, dim=0) if rep > 1 else t for t in (k, v))
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]):
            o = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)
        return o[0]

    def layer(self, x, on_kv: Any = None):
        """(next activations, this layer's K/V [2, S, KV] contiguous); on_kv(K/V) is called as soon as the projection
        has made them, before the layer's attention and MLP (where a layer-pipelined schedule sends them)."""
        torch, s, kv, hq = self.torch, self.s, self.kv, self.hq
        qkv = self.rms(x) @ self.wqkv
        qw = hq * HEAD_DIM
        kvl = torch.stack([qkv[:, qw:qw + kv], qkv[:, qw + kv:]])
        if on_kv is not None:
            on_kv(kvl)
        q = qkv[:, :qw].view(s, hq, HEAD_DIM).transpose(0, 1)
        k = qkv[:, qw:qw + kv].view(s, kv // HEAD_DIM, HEAD_DIM).transpose(0, 1)
        v = qkv[:, qw + kv:].view(s, kv // HEAD_DIM, HEAD_DIM).transpose(0, 1)
        o = self.attention(q, k, v)
        h = x + o.transpose(0, 1).reshape(s, qw) @ self.wo
        g, u = (self.rms(h) @ self.wgu).chunk(2, dim=-1)
        y = h + (torch.nn.functional.silu(g) * u) @ self.wd
        return y, kvl


def block_table(torch: Any, s: int, seed: int = 1):
    """The decode rank's shuffled block table: page of each 16-token block."""
    return torch.randperm(s // BLOCK, generator=torch.Generator().manual_seed(seed))


def prefill(torch: Any, dist: Any, stack: Stack, peer: int, schedule: str) -> list:
    """Run the stack, sending each layer's K/V to `peer` (after its projection, or all at the end)."""
    x, sent, reqs = stack.x0, [], []
    send_now = (lambda kvl: reqs.append(dist.isend(kvl, peer))) if schedule == "layered" else None
    for _ in range(stack.layers):
        x, kvl = stack.layer(x, send_now)
        sent.append(kvl)
    if schedule == "after":
        reqs = [dist.isend(kvl, peer) for kvl in sent]
    for r in reqs:
        r.wait()
    return sent


def decode(torch: Any, dist: Any, cache, table, peer: int, s: int, kv: int, dtype: Any) -> None:
    """Receive every layer's K/V from `peer` and scatter it into `cache` [L, 2, pages, 16, KV] by `table`."""
    bufs = [torch.empty(2, s, kv, dtype=dtype, device=cache.device) for _ in range(cache.shape[0])]
    reqs = [dist.irecv(b, peer) for b in bufs]
    for layer, (r, b) in enumerate(zip(reqs, bufs)):
        r.wait()
        cache[layer][:, table] = b.view(2, s // BLOCK, BLOCK, kv)


def run_pair(torch: Any, dist: Any, dims: tuple[int, int, int], device: Any, dtype: Any, schedule: str,
             hidden: int = 4096, mlp: int = 14336):
    """A callable running one prefill -> decode round on this rank, and the objects it works on."""
    s, kv, layers = dims
    rank = dist.get_rank()
    hq = 32 // (kv // HEAD_DIM) * (kv // HEAD_DIM)
    peer = rank ^ 1
    if rank % 2 == 0:
        stack = Stack(torch, s, kv, layers, hidden, mlp, hq, device, dtype)
        return (lambda: prefill(torch, dist, stack, peer, schedule)), stack
    cache = torch.empty(layers, 2, s // BLOCK, BLOCK, kv, dtype=dtype, device=device)
    table = block_table(torch, s).to(device)
    return (lambda: decode(torch, dist, cache, table, peer, s, kv, dtype)), (cache, table)


def measure(torch: Any, dist: Any, name: str, world: int, dev: Any) -> dict[str, Any]:
    """One shape's row: both schedules timed (max over ranks), `torch_kv_ms` the faster."""
    from torch_anchor import _median_ms

    from cuco.workloads.kv_transfer import shapes as kv_shapes

    dims = kv_shapes.parse(name).dims
    kv_shapes.check(kv_shapes.parse(name), world)
    row: dict[str, Any] = {"shape": name, "dims": list(dims), "world": world}
    for schedule in ("layered", "after"):
        fn, _ = run_pair(torch, dist, dims, dev, torch.bfloat16, schedule)
        row[f"torch_kv_{schedule}_ms"] = _median_ms(torch, dist, fn, iters=10, warmup=2)
        del fn
    row["torch_kv_ms"] = min(row["torch_kv_layered_ms"], row["torch_kv_after_ms"])
    return row


if __name__ == "__main__":
    from torch_shapes_run import run_over_shapes

    run_over_shapes(__doc__.splitlines()[0], "s2048-kv512,s3072-kv768,s4096-kv1024", measure)
