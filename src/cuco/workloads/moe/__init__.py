"""MoE layer (DeepSeek-V3 style): token dispatch -> expert FFN -> gate-weighted combine, with expert-load skew."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import attrs

from cuco.kit.compute import ComputeLibrary
from cuco.workload import Shape, Workload
from cuco.workloads.moe import shapes
from cuco.workloads.moe.render import DISPATCH_DTYPE, WORKLOAD_RULES, render, space

DESCRIPTION = """\
MoE layer (DeepSeek-V3 style), world W, dims T,H,I,E,K,R. Rank r holds T tokens X_r (T x H bf16, buffer 0,
symmetric), their routing (buffer 1 experts T x K int32, buffer 2 gates T x K fp32: top-K of E experts, seeded, expert
0 gets R times the slots of each other expert) and the weights of its E/W experts (buffer 3 W1: E/W x 2I x H,
gate rows then up rows; buffer 4 W2: E/W x H x I). Output buffer 5 Y_r[t] = sum_k gate[t,k] *
FFN_{expert[t,k]}(X_r[t]), FFN_e(x) = (silu(x W1g_e^T) * (x W1u_e^T)) W2_e^T, bf16 out, fp32 accumulate.
Expert e lives on rank e / (E/W). Buffers 6 'pub' (symmetric) and 7 'work' are scratch (moe_dev.cuh layouts).
The expert FFN is the compute library (cuco/compute/moe.h: CUTLASS grouped GEMM, device-side group sizes).
The host baseline sorts slots by expert, exchanges counts, AlltoAllv's the rows (grouped ncclSend/ncclRecv),
runs the FFN, AlltoAllv's the outputs back and sums them with the gates. The bound is max(FFN on the received
rows, dispatch+combine alone). What wins: compute the rows of your own tokens (and hot experts) while the other
ranks' rows arrive on few SMs or the copy engines; fp8 dispatch halves the bytes.
"""


@attrs.frozen
class MoeWorkload(Workload):
    """The MoE workload: shapes may also be given by name ('paper-r3', 'dsv3-r1', ...)."""

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        """A shape by name ('paper-r3', ...) or as T,H,I,E,K,R."""
        return shapes.parse(text)

    def shapes_for(self, world: int, which: str = "bench") -> list[Shape]:
        """As Workload.shapes_for; for verification, a small shape with 2*world experts where no fixed one
        fits this world size (E must be a multiple of W)."""
        found = super().shapes_for(world, which)
        if which == "verify" and not found and 1 <= world <= shapes.MAX_WORLD:
            found = [shapes.verify_for(world)]
        return found


WORKLOAD = MoeWorkload(
    name="moe",
    description=DESCRIPTION,
    dim_names=shapes.DIM_NAMES,
    verify_shapes=(shapes.NAMED["verify-top2"], shapes.NAMED["verify-top1"]),
    bench_shapes=(shapes.NAMED["paper-r3"], shapes.NAMED["dsv3-r1"]),
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
    compute=ComputeLibrary(sources=("compute/moe_ffn.cu",), header="compute/moe_ffn.h", libraries=("cutlass",),
                           arch="sm_90a", flags=("-DNDEBUG",)),
)

__all__ = ["DISPATCH_DTYPE", "WORKLOAD", "WORKLOAD_RULES", "render", "space"]
