"""Ring-attention problem sizes: the dims (S, HQ, HKV, D, CAUSAL), the named shapes, and the constraints checked
before anything builds."""

from __future__ import annotations

from typing import Sequence

from cuco.shape import parse_named
from cuco.workload import Shape, ShapeError

DIM_NAMES = ("S", "HQ", "HKV", "D", "CAUSAL")
HEAD_DIMS = (32, 64, 128)  # the compute library's FMHA instantiations
KV_TILE = 128              # rows of one FMHA KV tile (at most): a zigzag chunk must be a multiple of it
MAX_WORLD = 72             # one NVLink domain
LLAMA_TOKENS_PER_RANK = 8192

#: The published sweep (32 heads, head dim 32 and 64, total sequence 4096 and 8192, causal), a Llama-3-8B-like
#: config (32 query heads, 8 KV heads, head dim 128, 8192 tokens per rank: S = 8192 at W = 1, see `bench_for`),
#: its non-causal twin, and small verify shapes (GQA and MHA, causal and not).
NAMED: dict[str, Shape] = {
    **{f"s{s}-d{d}": Shape((s, 32, 32, d, 1)) for d in (32, 64) for s in (4096, 8192)},
    "llama3-8b": Shape((LLAMA_TOKENS_PER_RANK, 32, 8, 128, 1)),
    "llama3-8b-full": Shape((LLAMA_TOKENS_PER_RANK, 32, 8, 128, 0)),
    "verify-gqa-causal": Shape((2048, 8, 4, 128, 1)),
    "verify-mha-full": Shape((1024, 4, 4, 64, 0)),
    "verify-d32-causal": Shape((2048, 4, 4, 32, 1)),
}


def parse(text: str | Sequence[int]) -> Shape:
    """A named shape ('s8192-d64', 'llama3-8b', ...) or five integers S,HQ,HKV,D,CAUSAL."""
    return parse_named(text, NAMED, "attention_cp", DIM_NAMES, "total tokens, query heads, KV heads, head dim, causal 0/1")


def bench_for(world: int) -> list[Shape]:
    """The benchmark shapes at world size `world`: the sweep at its fixed total sequence, Llama at 8192 tokens
    per rank."""
    sweep = [NAMED[f"s{s}-d{d}"] for d in (32, 64) for s in (4096, 8192)]
    llama = [Shape((LLAMA_TOKENS_PER_RANK * world, *NAMED[n].dims[1:])) for n in ("llama3-8b", "llama3-8b-full")]
    return sweep + llama


def verify_for(world: int) -> Shape:
    """A small causal GQA verify shape for any world size: 2W zigzag chunks of 128 tokens."""
    return Shape((2 * world * KV_TILE, 8, 2, 64, 1))


def check(shape: Shape, world: int) -> None:
    """Raise ShapeError naming the violated constraint and its fix (the plugin's describe() enforces the same)."""
    if len(shape.dims) != 5:
        raise ShapeError(f"attention_cp takes 5 sizes {','.join(DIM_NAMES)}; got {shape}")
    s, hq, hkv, d, causal = shape.dims
    if not 1 <= world <= MAX_WORLD:
        raise ShapeError(f"the world size must be between 1 and {MAX_WORLD} (one NVLink domain); got {world}")
    if causal not in (0, 1):
        raise ShapeError(f"CAUSAL must be 0 (full attention) or 1 (causal, zigzag layout); got {causal}")
    if d not in HEAD_DIMS:
        raise ShapeError(f"head dim D={d} is not supported: the compute library instantiates the FMHA for D in "
                         f"{HEAD_DIMS}; pick one of those")
    if hq < 1 or hkv < 1 or hq % hkv:
        raise ShapeError(f"HQ={hq} query heads must be a positive multiple of HKV={hkv} KV heads (GQA groups of "
                         f"HQ/HKV query heads share one KV head); pick HKV dividing HQ")
    parts = 2 * world if causal else world
    what = "2W zigzag chunks (rank r holds chunks r and 2W-1-r)" if causal else "W blocks"
    if s < 1 or s % parts:
        raise ShapeError(f"S={s} tokens must divide into {what}: S must be a multiple of {parts}; use S = "
                         f"{parts} * k * {KV_TILE}")
    if (s // parts) % KV_TILE:
        raise ShapeError(f"S={s} gives {s // parts} tokens per {'chunk' if causal else 'block'}, not a multiple of "
                         f"{KV_TILE} (the FMHA's KV tile); use S = {parts} * k * {KV_TILE}")
    if (s // world) * hq * d >= 2**31:
        raise ShapeError(f"S/W * HQ * D = {(s // world) * hq * d} elements per rank must stay below 2^31")


def flops(shape: Shape, world: int) -> float:
    """Attention flops per rank (QK^T and PV, 4 * S_r * S * HQ * D), halved for causal."""
    s, hq, _hkv, d, causal = shape.dims
    full = 4.0 * (s / world) * s * hq * d
    return full / 2 if causal else full


def comm_bytes(shape: Shape, world: int) -> float:
    """KV bytes a rank receives: the other ranks' K and V blocks (bf16); causal reads only half of the blocks of
    lower ranks, on average a quarter of the blocks less."""
    s, _hq, hkv, d, causal = shape.dims
    block = 2 * (s / world) * hkv * d * 2
    others = world - 1
    return block * (others - (others / 2 * 0.5 if causal else 0))
