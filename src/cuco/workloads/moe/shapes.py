"""MoE problem sizes: the dims (T, H, I, E, K, R), the named shapes, and the constraints checked before any build."""

from __future__ import annotations

from typing import Sequence

from cuco.shape import dims_in
from cuco.workload import Shape, ShapeError
from cuco.workloads.moe import routing

DIM_NAMES = ("T", "H", "I", "E", "K", "R")
MAX_WORLD = 72          # one NVLink domain (moe_dev.cuh kMaxWorld)
MAX_EXPERTS = 1024      # per-expert counters in shared memory (moe_dev.cuh kMaxExperts)

#: The paper's shape (2 experts, top-1; `paper4`: 4 experts, one per rank at W = 4) and the DeepSeek-V3 shape
#: (256 experts, top-8), T tokens per rank.
NAMED: dict[str, Shape] = {
    **{f"paper-r{r}": Shape((4096, 7168, 2048, 2, 1, r)) for r in (1, 2, 3, 4, 5)},
    **{f"paper4-r{r}": Shape((4096, 7168, 2048, 4, 1, r)) for r in (1, 2, 3, 4, 5)},
    **{f"dsv3-r{r}": Shape((4096, 7168, 2048, 256, 8, r)) for r in (1, 3)},
    "verify-top2": Shape((256, 2048, 256, 8, 2, 3)),
    "verify-top1": Shape((128, 256, 128, 4, 1, 2)),
}


def parse(text: str | Sequence[int]) -> Shape:
    """A named shape ('paper-r3', 'dsv3-r1', ...) or six integers T,H,I,E,K,R."""
    if isinstance(text, str):
        key = text.strip()
        if key in NAMED:
            return NAMED[key]
        if any(c.isalpha() for c in key.replace("x", "")):
            raise ShapeError(f"unknown moe shape name {text!r}; known: {', '.join(NAMED)} (or six integers "
                             f"{','.join(DIM_NAMES)})")
        try:
            dims = dims_in(key)
        except ValueError:
            raise ShapeError(f"cannot read moe shape {text!r}; write {','.join(DIM_NAMES)} as integers") from None
    else:
        dims = tuple(int(d) for d in text)
    if len(dims) != len(DIM_NAMES):
        raise ShapeError(f"moe takes 6 sizes {','.join(DIM_NAMES)} (tokens per rank, hidden, expert FFN size, "
                         f"experts, top-k, skew r); got {text!r}")
    return Shape(dims)


def verify_for(world: int) -> Shape:
    """A small verify shape for any world size: 2*W experts, top-2, skew 2."""
    return Shape((128, 256, 128, 2 * world, 2, 2))


def check(shape: Shape, world: int) -> None:
    """Raise ShapeError naming the violated constraint (the plugin's describe() enforces the same)."""
    if len(shape.dims) != 6:
        raise ShapeError(f"moe takes 6 sizes {','.join(DIM_NAMES)}; got {shape}")
    t, h, i, e, k, r = shape.dims
    if not 1 <= world <= MAX_WORLD:
        raise ShapeError(f"the world size must be between 1 and {MAX_WORLD} (one NVLink domain); got {world}")
    if t < 1 or t * k >= 2**31:
        raise ShapeError(f"T={t} tokens per rank must be >= 1 with T*K < 2^31")
    if h < 128 or h % 128:
        raise ShapeError(f"H={h} must be a positive multiple of 128 (fp8 dispatch scales one block of 128 "
                         "channels; rows move in 16-byte words)")
    if i < 64 or i % 64:
        raise ShapeError(f"I={i} must be a positive multiple of 64 (GEMM tile depth)")
    if e < 1 or e % world:
        raise ShapeError(f"E={e} experts must be a positive multiple of the world size {world} (experts are "
                         "spread evenly over the ranks)")
    if e > MAX_EXPERTS:
        raise ShapeError(f"E={e} experts: at most {MAX_EXPERTS}")
    try:
        routing.check(t, e, k, r)
    except routing.RoutingError as exc:
        raise ShapeError(str(exc)) from None


def flops(shape: Shape, world: int) -> float:
    """Expert FFN flops per rank on average (T*K rows through 2*H*2I + 2*I*H)."""
    t, h, i, _e, k, _r = shape.dims
    return 2.0 * t * k * h * 3 * i


def comm_bytes(shape: Shape, world: int) -> float:
    """Bytes a rank receives on average: dispatch and combine rows from the other ranks (bf16)."""
    t, h, _i, _e, k, _r = shape.dims
    return 2.0 * t * k * h * 2 * (world - 1) / world
