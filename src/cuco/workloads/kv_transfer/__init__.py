"""KV-cache transfer from prefill to decode (disaggregated serving), overlapped with the prefill's layer compute."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import attrs

from cuco.kit.compute import ComputeLibrary
from cuco.workload import Shape, Workload
from cuco.workloads.kv_transfer import shapes
from cuco.workloads.kv_transfer.render import WORKLOAD_RULES, render, render_transfer_path, space

DESCRIPTION = """\
KV-cache transfer, prefill -> decode (disaggregated serving), world W = 1 or even, dims S (prompt tokens), KV (KV
width = 128 x KV heads), L (layers). Rank 2p prefills, rank 2p+1 decodes; W = 1 holds both roles on one GPU.
The prefill rank runs L Llama-3-8B-like layers (hidden 4096, MLP 14336, head dim 128, GQA) over its prompt X0
(buffer 0) with one weight set W (buffer 1) through the compute library (#include "cuco/compute/kv_transfer.h":
cuco_kvt_project / cuco_kvt_project_q / cuco_kvt_project_kv_rows (chunks) / cuco_kvt_finish on cuBLASLt and
CUTLASS's Hopper FMHA; cuco_kvt_copy_blocks moves 16-token blocks between token rows and paged caches, from or to a
peer's memory, with a chosen issuer group and CTA count). Each layer's K and V go into its paged cache (buffer 3,
[L][2][pool][16][KV], pages by its prefill table: buffer 2 words 0..S/16-1). Output: the decode rank's paged cache
(buffer 4, same layout) must hold every layer's K and V under the decode rank's own table (buffer 2 words S/16..;
symmetric, so the prefill rank can read it through LSA). Buffer 5 (symmetric, [L][2][S][KV]) is a staging area in
token order. The host baseline sends each layer's K/V with ncclSend/ncclRecv after computing it and scatters on the
decode side; the bound is max(layer stack alone, KV sends alone). What wins: move layer l (or chunks of it) on a few
SMs or the copy engines while layer l+1 computes, straight into the decode pages.
"""


@attrs.frozen
class KvTransferWorkload(Workload):
    """The KV-transfer workload: shapes may also be given by name ('s4096-kv1024', 'long', 'verify-kv512', ...)."""

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        """A named shape or three integers S,KV,L (shapes.parse)."""
        return shapes.parse(text)


def tensors(shape: Shape, world: int) -> dict[str, tuple[tuple[int, ...], str]]:
    """The plugin's buffers, in its order (weights flat; caches [L, 2, pool, 16, KV])."""
    s, kv, layers = shape.dims
    nblk = s // shapes.BLOCK_TOKENS
    pool = nblk + (nblk + 7) // 8
    qw = shapes.query_heads(kv) * shapes.HEAD_DIM
    h, f = shapes.HIDDEN, shapes.MLP
    weights = h * (qw + 2 * kv) + qw * h + h * 2 * f + f * h
    cache = ((layers, 2, pool, shapes.BLOCK_TOKENS, kv), "bfloat16")
    return {"X0": ((s, h), "bfloat16"), "W": ((weights,), "bfloat16"), "tables": ((2, nblk), "int32"),
            "pcache": cache, "dcache": cache, "stage": ((layers, 2, s, kv), "bfloat16")}


WORKLOAD = KvTransferWorkload(
    name="kv_transfer",
    description=DESCRIPTION,
    dim_names=shapes.DIM_NAMES,
    verify_shapes=(shapes.NAMED["verify-kv512"], shapes.NAMED["verify-kv768"]),
    bench_shapes=tuple(shapes.NAMED[f"s{s}-kv{kv}"] for s in shapes.SWEEP_S for kv in shapes.SWEEP_KV)
    + (shapes.NAMED["long"],),
    folder=Path(__file__).resolve().parent,
    plugin_source="plugin.cu",
    seed_source="seed_host.cu",
    space=space,
    render=render,
    check_shape=shapes.check,
    flops=shapes.flops,
    comm_bytes=shapes.comm_bytes,
    libraries=("cublasLt",),
    default_world=1,
    compute=ComputeLibrary(sources=("compute/layer.cu", "compute/paging.cu"), header="compute/kv_compute.h",
                           libraries=("cutlass", "cublasLt"), arch="sm_90a",
                           flags=("--expt-relaxed-constexpr", "-DNDEBUG")),
    tensors=tensors,
)

__all__ = ["WORKLOAD", "WORKLOAD_RULES", "render", "render_transfer_path", "space"]
