"""KV-transfer problem sizes: the dims (S, KV, L), the named shapes, and the constraints checked before any build."""

from __future__ import annotations

from typing import Sequence

from cuco.shape import parse_named
from cuco.workload import Shape, ShapeError

DIM_NAMES = ("S", "KV", "L")
BLOCK_TOKENS = 16       # tokens per page (kv_layout.cuh kBlockTokens)
HEAD_DIM = 128          # Llama-3 head dim; the KV width is a whole number of KV heads
FMHA_KV_TILE = 128      # the Hopper FMHA's key tile at head dim 128: S must be a multiple (no key-side masking)
MAX_QUERY_HEADS = 32    # Llama-3-8B
HIDDEN, MLP = 4096, 14336
MAX_WORLD = 72          # one NVLink domain
MAX_LAYERS = 256        # kv_layout.cuh kMaxLayers

SWEEP_S = (2048, 3072, 4096)
SWEEP_KV = (512, 768, 1024)

#: The published sweep (L = 32), a long prompt, a short prompt (256 tokens: where a transfer's fixed costs, not its
#: bytes, decide), and small shapes that verify in seconds.
NAMED: dict[str, Shape] = {
    **{f"s{s}-kv{kv}": Shape((s, kv, 32)) for s in SWEEP_S for kv in SWEEP_KV},
    "long": Shape((32768, 1024, 32)),
    "s256-kv1024": Shape((256, 1024, 32)),
    "verify-kv512": Shape((256, 512, 2)),
    "verify-kv768": Shape((384, 768, 3)),
}


def query_heads(kv: int) -> int:
    """Query heads for KV width `kv`: the largest multiple of the KV heads that is at most 32 (32 for 4 or 8 KV heads,
    30 for 6: grouped-query attention needs a whole number of query heads per KV head)."""
    return MAX_QUERY_HEADS // (kv // HEAD_DIM) * (kv // HEAD_DIM)


def parse(text: str | Sequence[int]) -> Shape:
    """A named shape ('s4096-kv1024', 'long', 'verify-kv512', ...) or three integers S,KV,L."""
    return parse_named(text, NAMED, "kv_transfer", DIM_NAMES, "prompt tokens, KV width = 128 x KV heads, layers")


def pages_per_rank(shape: Shape) -> int:
    """Pages a decode rank receives over all layers: a K and a V page per 16-token block per layer."""
    s, _kv, layers = shape.dims
    return 2 * (s // BLOCK_TOKENS) * layers


def with_pages(shape: Shape, pages: int) -> Shape:
    """`shape` with enough layers for at least `pages` pages per rank (never fewer than its own, at most
    MAX_LAYERS): where the transfer path alone is timed, so its rate is not that of a few thousand pages."""
    s, kv, layers = shape.dims
    per_layer = 2 * (s // BLOCK_TOKENS)
    return Shape((s, kv, min(MAX_LAYERS, max(layers, -(-pages // per_layer)))))


def check(shape: Shape, world: int) -> None:
    """Raise ShapeError naming the violated constraint and its fix (the plugin's describe() enforces the same)."""
    if len(shape.dims) != 3:
        raise ShapeError(f"kv_transfer takes 3 sizes {','.join(DIM_NAMES)}; got {shape}")
    s, kv, layers = shape.dims
    if world < 1 or world > MAX_WORLD:
        raise ShapeError(f"the world size must be between 1 and {MAX_WORLD} (one NVLink domain); got {world}")
    if world > 1 and world % 2:
        raise ShapeError(f"world size {world} is odd: ranks pair up prefill -> decode (rank 2p prefills, rank 2p+1 "
                         f"decodes); use an even world size, or 1 to keep both roles on one GPU")
    if s < 1 or s % BLOCK_TOKENS:
        raise ShapeError(f"S={s} tokens is not a multiple of the block size {BLOCK_TOKENS}: the paged cache holds "
                         f"whole blocks; pad the prompt to {-(-max(s, 1) // BLOCK_TOKENS) * BLOCK_TOKENS} tokens")
    if s % FMHA_KV_TILE:
        raise ShapeError(f"S={s} must be a multiple of {FMHA_KV_TILE} (the Hopper FMHA's key tile at head dim 128); "
                         f"pad the prompt to {-(-s // FMHA_KV_TILE) * FMHA_KV_TILE} tokens")
    if kv < HEAD_DIM or kv % HEAD_DIM:
        raise ShapeError(f"KV width {kv} is not a multiple of the head dim {HEAD_DIM}: it must be a whole number of "
                         f"KV heads (e.g. 512, 768, 1024 for 4, 6, 8 heads)")
    if kv // HEAD_DIM > MAX_QUERY_HEADS:
        raise ShapeError(f"KV width {kv} means {kv // HEAD_DIM} KV heads, more than the {MAX_QUERY_HEADS} query heads")
    if not 1 <= layers <= MAX_LAYERS:
        raise ShapeError(f"L={layers} layers must be between 1 and {MAX_LAYERS}")
    if s * (query_heads(kv) * HEAD_DIM + 2 * kv) >= 2**31:
        raise ShapeError(f"S={s} is too long: the attention's strides must stay within int32")


def flops(shape: Shape, world: int) -> float:
    """Prefill flops per prefill rank: the four GEMMs of every layer plus causal attention (half of S x S)."""
    s, kv, layers = shape.dims
    qw = query_heads(kv) * HEAD_DIM
    gemm = 2.0 * s * (HIDDEN * (qw + 2 * kv) + qw * HIDDEN + HIDDEN * 2 * MLP + MLP * HIDDEN)
    attn = 2.0 * 2 * s * s * qw / 2
    return layers * (gemm + attn)


def comm_bytes(shape: Shape, world: int) -> float:
    """KV bytes a decode rank receives: K and V of every token of every layer (bf16)."""
    s, kv, layers = shape.dims
    return 2.0 * 2 * s * kv * layers
