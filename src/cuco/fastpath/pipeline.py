"""The pipeline range of a host program: per host function, the statements from the first kernel that feeds a
collective to the last that consumes one, with no allocation, free, communicator setup, host wait or copy inside.
It is what a search may rearrange (the EVOLVE block, cuco.fastpath.transform) and what the program harness times
(the region, cuco.program.source)."""

from __future__ import annotations

from cuco.fastpath import parse as P
from cuco.fastpath.model import Analysis

__all__ = ["pipeline_ranges"]

#: Calls that keep a statement out of a pipeline range: the host waits, reads results or manages memory there.
_BLOCKING = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def pipeline_ranges(src: P.Source, a: Analysis) -> list[tuple[int, int, str]]:
    """Per host function: the top-level statements holding collectives, extended over neighbouring statements
    that feed or consume them on the device: kernel launches, calls of this file's functions that launch kernels
    and do nothing else fenced, NCCL group calls, event records and waits (and the cudaSetDevice around them), but
    no allocation, free, communicator setup, host wait or copy. Where the collectives sit in a bare `{ ... }` block
    that also waits on the host, copies or manages memory (an RAII scope), the range lies inside that block. This
    is what a search may rearrange (EVOLVE) and what the program harness times (the region)."""
    fenced = {x.line for x in a.allocations} | {x.line for x in a.frees} | {x.line for x in a.comm_calls}
    fenced |= {s.line for s in a.syncs if s.api.startswith(_BLOCKING)}
    device_work = {l.line for l in a.launches} | {g.start_line for g in a.groups} | {g.end_line for g in a.groups}
    device_work |= {s.line for s in a.syncs if s.api in ("cudaEventRecord", "cudaStreamWaitEvent")}
    device_work |= _launching_helper_calls(src, a, fenced)
    coll_lines = {c.line for c in a.collectives}
    out = []
    for fn in (n for n in P.walk(src.root) if n.type == "function_definition"):
        body = fn.child_by_field_name("body")
        if body is None or P.enclosing(fn, ("function_definition",)) is not None:
            continue
        span = _range_in(body, coll_lines, device_work, fenced)
        if span is not None:
            out.append((*span, "pipeline"))
    return out


def _range_in(block, coll_lines: set[int], device_work: set[int], fenced: set[int]) -> tuple[int, int] | None:
    """The pipeline range among the statements of `block` (see pipeline_ranges), or None."""
    stmts = [s for s in block.named_children if s.type != "comment"]
    spans = [(P.line_of(s), s.end_point[0] + 1) for s in stmts]

    def has(lines: set[int], span: tuple[int, int]) -> bool:
        return any(span[0] <= ln <= span[1] for ln in lines)

    def joins(span: tuple[int, int]) -> bool:
        return has(device_work, span) and not has(fenced, span)

    idx = [i for i, sp in enumerate(spans) if has(coll_lines, sp)]
    if not idx:
        return None
    if len(idx) == 1 and stmts[idx[0]].type == "compound_statement" and has(fenced, spans[idx[0]]):
        # an RAII scope: timing the whole block would time its objects' allocations, frees and read-backs
        return _range_in(stmts[idx[0]], coll_lines, device_work, fenced)
    lo, hi = min(idx), max(idx)
    while lo > 0 and joins(spans[lo - 1]):
        lo -= 1
    while hi + 1 < len(spans) and joins(spans[hi + 1]):
        hi += 1
    if has(fenced, (spans[lo][0], spans[hi][1])) and spans[lo][0] == P.line_of(block):
        return None
    return spans[lo][0], spans[hi][1]


def _launching_helper_calls(src: P.Source, a: Analysis, fenced: set[int]) -> set[int]:
    """Lines that call a function of this file which launches kernels and holds nothing fenced (a helper around a
    launch, `forward_backward(act, grad, stream)`): device work for pipeline_ranges like the launch itself."""
    launches = {l.line for l in a.launches}
    helpers = set()
    for fn in (n for n in P.walk(src.root) if n.type == "function_definition"):
        lines = set(range(P.line_of(fn), fn.end_point[0] + 2))
        if lines & launches and not lines & fenced:
            helpers.add(P.function_name(src, fn))
    helpers.discard("")
    return {P.line_of(n) for n in P.walk(src.root) if n.type == "call_expression" and P.callee_name(src, n) in helpers}
