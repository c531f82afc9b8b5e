"""Ring attention: FlashAttention forward with context parallelism (zigzag causal or full, GQA), with the KV
exchange overlapped with the attention."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import attrs

from cuco.kit.compute import ComputeLibrary
from cuco.workload import Shape, ShapeError, Workload
from cuco.workloads.attention_cp import shapes
from cuco.workloads.attention_cp.render import WORKLOAD_RULES, render, space

DESCRIPTION = """\
Ring attention (FlashAttention forward with context parallelism), world W, dims S,HQ,HKV,D,CAUSAL. The sequence
of S tokens is sharded over the ranks: causal uses the zigzag layout (2W chunks, rank r holds chunks r and 2W-1-r,
so every rank does the same causal work), full attention holds block r. Rank r has Q (buffer 0, S/W x HQ x D
bf16) and its KV block (buffer 1, symmetric: K rows then V rows, S/W x HKV x D each) and computes O = softmax(Q
K^T / sqrt(D)) V over the whole sequence (buffer 2, bf16) and the log-sum-exp of every row (buffer 3, fp32
[HQ][S/W]); query head h reads KV head h / (HQ/HKV). Buffer 4 'ring' (symmetric, W slots) is where blocks land,
buffer 5 'work' holds one partial output and its LSE. At ring step s a rank attends to the block of rank
(r - s) mod W (the compute library: CUTLASS Hopper FMHA with LSE, cuco/compute/attention_cp.h, which also holds
the zigzag schedule) and merges it with the log-sum-exp. The host baseline forwards blocks around the ring with
ncclSend/ncclRecv on a side stream. The bound is max(all steps' attention, the ring alone). What wins: attend to
the own block while the others arrive on few SMs or the copy engines, read only the half of a lower rank's block
that causal attention needs, start on slices as they land.
"""


@attrs.frozen
class AttentionCpWorkload(Workload):
    """The ring-attention workload: shapes may also be given by name ('s8192-d64', 'llama3-8b', ...)."""

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        """A named shape ('s8192-d64', 'llama3-8b', ...) or five integers S,HQ,HKV,D,CAUSAL."""
        return shapes.parse(text)

    def shapes_for(self, world: int, which: str = "bench") -> list[Shape]:
        """As Workload.shapes_for; the Llama shapes keep 8192 tokens per rank at every world size, and a small
        verify shape stands in where no fixed one divides into this world's chunks."""
        found = super().shapes_for(world, which)
        if which == "bench":
            found = [s for s in shapes.bench_for(world) if _fits(s, world)]
        elif not found and 1 <= world <= shapes.MAX_WORLD:
            found = [shapes.verify_for(world)]
        return found


def _fits(shape: Shape, world: int) -> bool:
    try:
        shapes.check(shape, world)
    except ShapeError:
        return False
    return True


WORKLOAD = AttentionCpWorkload(
    name="attention_cp",
    description=DESCRIPTION,
    dim_names=shapes.DIM_NAMES,
    verify_shapes=(shapes.NAMED["verify-gqa-causal"], shapes.NAMED["verify-mha-full"],
                   shapes.NAMED["verify-d32-causal"]),
    bench_shapes=tuple(shapes.bench_for(1)),
    folder=Path(__file__).resolve().parent,
    plugin_source="plugin.cu",
    seed_source="seed_host.cu",
    space=space,
    render=render,
    check_shape=shapes.check,
    flops=shapes.flops,
    comm_bytes=shapes.comm_bytes,
    libraries=(),
    default_world=1,
    compute=ComputeLibrary(sources=("compute/attention_cp.cu", "compute/attention_cp_alone.cu",
                                     "compute/attention_cp_suffix.cu", "compute/attention_cp_suffix_wait.cu"),
                           header="compute/attention_cp.h",
                           libraries=("cutlass",), arch="sm_90a", flags=("-DNDEBUG",)),
)

__all__ = ["WORKLOAD", "WORKLOAD_RULES", "render", "space"]
