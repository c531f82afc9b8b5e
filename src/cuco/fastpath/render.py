"""Readable views of an Analysis: a report for people and a compact text for prompts."""

from __future__ import annotations

from cuco.fastpath.model import Analysis


def _loop(l) -> str:
    return f" in loop L{l.line}-{l.end_line} `{l.header[:60]}`" if l is not None else ""


def _communicated(a: Analysis) -> set[int]:
    return {c.send_storage for c in a.collectives} | {c.recv_storage for c in a.collectives}


def render_report(a: Analysis) -> str:
    """Multi-line report: collectives, allocations, kernels, launches, synchronisation, groups, dataflow."""
    out = [f"Host program {a.path} ({a.form}, {a.lines} lines, launch model: {a.launch_model})"]
    out.append(f"Collectives ({len(a.collectives)}):")
    for c in a.collectives:
        args = ", ".join(f"{k}={v}" for k, v in c.args.items())
        extra = [f"group #{c.group}" if c.group is not None else "", f"via {c.macro}" if c.macro else "",
                 "in place" if c.in_place else "", "rank-dependent" if c.rank_dependent else ""]
        tags = ", ".join(x for x in extra if x)
        out.append(f"  L{c.line} {c.name}({args}) in {c.function}(){_loop(c.loop)}{' [' + tags + ']' if tags else ''}")
    if a.groups:
        out.append("NCCL groups:")
        for i, g in enumerate(a.groups):
            other = f", also {', '.join(g.other_nccl)}" if g.other_nccl else ""
            out.append(f"  #{i} L{g.start_line}-{g.end_line}: {len(g.members)} call(s){other}")
    out.append(f"Allocations ({len(a.allocations)}):")
    comm = _communicated(a)
    for x in a.allocations:
        names = [n for n in a.storage_names.get(x.storage, ()) if n != x.variable]
        mark = f" (communicated, as {', '.join(names[:4])})" if x.storage in comm and names else \
            (" (communicated)" if x.storage in comm else "")
        out.append(f"  L{x.line} {x.api}({x.variable}, {x.size}){mark}")
    out.append(f"Kernels defined ({len(a.kernels)}):")
    for k in a.kernels:
        ps = ", ".join(f"{'const ' if p.is_const else ''}{p.name}{'*' if p.is_pointer else ''}"
                       f"{' (written)' if p.written else ''}" for p in k.params)
        out.append(f"  L{k.line}-{k.end_line} {k.name}({ps})")
    out.append(f"Kernel launches ({len(a.launches)}):")
    for l in a.launches:
        out.append(f"  L{l.line} {l.kernel}<<<{l.grid}, {l.block}{', ' + l.smem if l.smem else ''}"
                   f"{', ' + l.stream if l.stream else ''}>>> reads {list(l.reads)} writes {list(l.writes)}{_loop(l.loop)}")
    out.append(f"Synchronisation and copies ({len(a.syncs)}):")
    for s in a.syncs:
        out.append(f"  L{s.line} {s.api}({', '.join(s.args)}){_loop(s.loop)}")
    out.append(f"Dataflow ({len(a.edges)} edges):")
    for e in a.edges:
        out.append(f"  {e.producer} -> {e.consumer} via `{e.buffer}`")
    if a.problems:
        out.append("Problems:")
        for p in a.problems:
            out.append(f"  {'error' if p.fatal else 'note'}: {p.message}")
    return "\n".join(out)


def prompt_text(a: Analysis) -> str:
    """Compact summary for an LLM prompt: what is communicated where, and what produces/consumes it."""
    lines = [f"Program form: {a.form}, launch model: {a.launch_model} (keep it). Host collectives to replace:"]
    for c in a.collectives:
        lines.append(f"- line {c.line}: {c.name} send={c.send_buffer or '-'} recv={c.recv_buffer or '-'} "
                     f"count={c.args.get('count', '?')} dtype={c.args.get('datatype', '?')} comm={c.comm} "
                     f"stream={c.stream}{' (in place)' if c.in_place else ''}{_loop(c.loop)}")
    if a.edges:
        lines.append("Dataflow:")
        lines += [f"- {e.producer} -> {e.consumer} via {e.buffer}" for e in a.edges]
    allocs = [x for x in a.allocations if x.storage in _communicated(a)]
    if allocs:
        lines.append("Communicated buffers are allocated at: " + ", ".join(f"{x.variable} (line {x.line}, {x.api})"
                                                                           for x in allocs))
    if a.problems:
        lines.append("Not handled by rules: " + "; ".join(p.message for p in a.problems))
    return "\n".join(lines)
