"""Wrong candidates that verification must reject (used by the GPU tests of the harness's checks)."""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.workloads.gemm_allgather.render import render

#: The point the never-waits fixture is derived from: copy-engine gather of every block, then one GEMM.
NEVER_WAITS_BASE = "lsa/deferred/world/copy_engine/whole"
_COPY_ON_MAIN = "cudaMemcpyDeviceToDevice, main)"


def never_waits() -> str:
    """A candidate whose gather runs on the side stream (the communication path) while the GEMM on the main
    stream reads A_full without waiting for it. It races: under delayed arrival it must fail, at any W."""
    code = render(Directives.from_label(NEVER_WAITS_BASE))
    if code.count(_COPY_ON_MAIN) != 1:
        raise AssertionError(f"the {NEVER_WAITS_BASE} template changed: update the never-waits fixture")
    return code.replace(_COPY_ON_MAIN, "cudaMemcpyDeviceToDevice, ctx->side_stream /* never waits for it */)")
