"""The design space of a user's program and the rendering of a point: the fast path's rewrite of every
recognised collective, parameterised by the point (read by cuco/fastpath/cuda/lsa_runtime.cuh and lsa_api.cuh).

- placement: `deferred` (each communication kernel where the NCCL call was, on the caller's stream) or
  `stream_overlap` (on a side stream; the caller's stream waits at the `cucoJoin()` the transform places before
  the first statement that depends on the transfer, so independent kernels in between run beside it);
- comm_ctas (extra directive): CTAs per communication kernel; fewer leave SMs to overlapping compute.
Backend lsa, sync scope world (barrier-ordered kernels), issuer cta and whole buffers are fixed: they are what
the rewritten kernels implement.
"""

from __future__ import annotations

from cuco.design_space import WHOLE, DesignSpace, Directives, Topology
from cuco.extra_directives import ExtraDirective
from cuco.fastpath import annotate
from cuco.fastpath.model import Analysis
from cuco.fastpath.transform import transform

COMM_CTAS = ExtraDirective("comm_ctas", ("32", "16", "8"),
                           "CTAs per communication kernel; fewer leave SMs to compute that overlaps it")
_PLACEMENT = {"deferred": 0, "stream_overlap": 1}


def program_space(topology: Topology) -> DesignSpace:
    """The legal points for a program at `topology` (one node: LSA)."""
    return DesignSpace(backends=("lsa",), placements=tuple(_PLACEMENT), sync_scopes=("world",), issuers=("cta",),
                       chunk_sizes=(WHOLE,), topology=topology, extras=(COMM_CTAS,))


def point_block(point: Directives) -> str:
    """The point's macros as an EVOLVE block (what a search may change), read by the fast path's runtime."""
    body = (f"// cuco design point: {point.label()}\n"
            f"#define CUCOFP_PLACEMENT {_PLACEMENT[point.placement]}  // {point.placement}\n"
            f"#define CUCOFP_COMM_CTAS {int(point.get('comm_ctas'))}\n")
    return annotate.wrap(body, "point")


def render(observed: str, analysis: Analysis, point: Directives) -> str:
    """The observed program rewritten onto the GPU at `point`."""
    return transform(analysis, observed, point_block=point_block(point)).code
