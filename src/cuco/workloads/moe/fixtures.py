"""Wrong candidates that verification must reject (the GPU tests run them under delayed arrival).

Each is a rendered point with one deliberate fault, and compiles. The never-waits fixtures change the EVOLVE block
only and pass the static check against their base point, so only verification under delayed arrival can catch them:
- never_waits: the fused point's FFN is called without the chunk flags, so its up GEMM loads every tile's rows
  without waiting for them, while the pulls (the own rows' included) are delayed on the side stream: it reads rows
  before they land, at any W;
- nvshmem_never_waits: backend=nvshmem, the own-rows FFN starts without waiting for its rows' puts (the own rows'
  puts included), which run late on the side stream: at any W;
- outputs_never_wait: stream_overlap, whose owners store the peers' rows' outputs at their sources: the combine
  reads them without waiting for the owners' signals, while the owners still wait for their (delayed) dispatch:
  at W >= 2 (at W = 1 no output comes from another rank). It needs the delay staggered by rank: with one delay
  for all, reader and owner start their peer rows together and the reader won the race at W = 2.

The plugin's check is tested by three more, which edit the shared device code (moe_rows.cuh, in the frozen head; the
static check would refuse them as candidates, the harness runs them all the same):
- dropped_token: the first received row is never dispatched (its expert output stays poison);
- dropped_slot_output: the combine drops slot 0 of every token;
- wrong_gate: the combine halves the gate of slot 1.
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.workloads.moe.render import render

#: The gather-then-FFN point the routing fixtures edit, and the point the wrong-gate fixture edits.
DEFERRED_BASE = "lsa/deferred/world/warp/whole/dispatch_dtype=bf16"
OVERLAP_BASE = "lsa/stream_overlap/signal/cta/whole/dispatch_dtype=bf16"
#: The chunk pipeline: every row, the own ones included, is pulled on the side stream, so W = 1 has a race to lose.
FUSED_BASE = "lsa/fused/signal/warp/1MiB/dispatch_dtype=bf16"
#: Puts with signals: every row, the own ones included, is put on the side stream.
NVSHMEM_BASE = "nvshmem/split_put_wait/signal/cta/whole/dispatch_dtype=bf16"

_ROW_LAMBDA = "[&](int64_t r, __nv_bfloat16*& dst, const __nv_bfloat16*& src) {"  # the bf16 gather's, per row
_ROWMAP_LINE = "\n    const int64_t m = rowmap[r];\n"
_ROWMAP = _ROW_LAMBDA + _ROWMAP_LINE
_GATE = "        const float gw = gate[j];"
_CHUNK_WAIT = "  if ((rc = ffn_arriving(ctx, st, flag, chunk_rows(g), cs))) return rc;\n"
_NV_WAIT_OWN = "  nv_wait_own_kernel<<<1, 32, 0, cs>>>(g, st->P, pub, shadow);\n"
_OUTPUTS_READY = ("  if ((rc = signal_all(ctx, st, cs, SIG_OUT)) || (rc = wait_all(ctx, st, cs, SIG_OUT, kThisLaunch)))"
                  " return rc;\n")


def _edit(label: str, anchor: str, replacement: str, code: str | None = None) -> str:
    code = render(Directives.from_label(label)) if code is None else code
    if code.count(anchor) != 1:
        raise AssertionError(f"the {label} template changed ({anchor.strip()[:40]!r} is not there once): update the "
                             "moe fixtures")
    return code.replace(anchor, replacement)


def dropped_token() -> str:
    """The first received row is never dispatched."""
    return _edit(DEFERRED_BASE, _ROWMAP,
                 _ROW_LAMBDA + "\n    if (r == 0) return false;  // fixture: the first received token is never dispatched"
                 + _ROWMAP_LINE)


def dropped_slot_output() -> str:
    """The combine loses every token's slot 0."""
    return _edit(DEFERRED_BASE, _GATE, "        const float gw = j == 0 ? 0.0f : gate[j];  // fixture: slot 0 is lost")


def wrong_gate() -> str:
    """The combine weights slot 1 with half its gate."""
    return _edit(OVERLAP_BASE, _GATE,
                 "        const float gw = j == 1 ? 0.5f * gate[j] : gate[j];  // fixture: wrong gate")


def never_waits() -> str:
    """The fused point's FFN runs without the chunk flags: its up GEMM never waits for its rows."""
    return _edit(FUSED_BASE, _CHUNK_WAIT, "  if ((rc = ffn_arriving(ctx, st, nullptr, chunk_rows(g), cs))) return rc;  "
                 "// fixture: the FFN never waits for its rows\n")


def nvshmem_never_waits() -> str:
    """backend=nvshmem: the own-rows FFN runs without waiting for its rows' puts (NVSHMEM: process mode at W >= 2)."""
    return _edit(NVSHMEM_BASE, _NV_WAIT_OWN, "  // fixture: the own-rows FFN never waits for its rows\n")


def outputs_never_wait() -> str:
    """stream_overlap: the combine reads this rank's outputs stored by the other ranks without waiting for their
    owners' signals (it still raises its own)."""
    return _edit(OVERLAP_BASE, _OUTPUTS_READY, "  if ((rc = signal_all(ctx, st, cs, SIG_OUT))) return rc;  "
                 "// fixture: the combine never waits for the owners' outputs\n")


#: The LSA fixtures (one process, any W), by name; each must fail verification.
FIXTURES = {"dropped token": dropped_token, "dropped slot output": dropped_slot_output, "wrong gate": wrong_gate,
            "never waits": never_waits}
#: LSA fixtures that fail at W >= 2 only (at W = 1 what they skip waiting for is not there).
MULTI_GPU_FIXTURES = {"outputs never wait": outputs_never_wait}
#: The fixtures whose fault sits in the EVOLVE block (legal candidates for the static check).
NEVER_WAITS = ("never waits", "nvshmem never waits", "outputs never wait")
#: Every fixture with the point it is derived from (NVSHMEM's included), for the CPU checks.
BASES = {"dropped token": DEFERRED_BASE, "dropped slot output": DEFERRED_BASE, "wrong gate": OVERLAP_BASE,
         "never waits": FUSED_BASE, "nvshmem never waits": NVSHMEM_BASE, "outputs never wait": OVERLAP_BASE}
ALL = {**FIXTURES, **MULTI_GPU_FIXTURES, "nvshmem never waits": nvshmem_never_waits}
