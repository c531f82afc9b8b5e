"""Dataflow between kernels, collectives and host copies: which launch produces what a collective sends,
which launch (or copy) consumes what it receives. Program order is line order inside one function; a
collective inside a loop also sees producers later in the loop body (the previous iteration)."""

from __future__ import annotations

import re
from typing import Iterable

import attrs

from cuco.fastpath.model import Analysis, Edge, Loop


@attrs.frozen
class _Event:
    where: str
    function: str
    line: int
    loop: Loop | None
    reads: tuple[str, ...]
    writes: tuple[str, ...]


def _root(arg: str) -> str:
    """Root variable of a copy argument text: '(char*)h.data()' -> 'h', 'buf[r] + off' -> 'buf'."""
    text = re.sub(r"\([^()]*\*\s*\)", " ", arg)          # casts
    m = re.search(r"(ctx->buffers\[\d+\])|([A-Za-z_]\w*(?:->\w+)?)", text.replace("&", " "))
    if not m:
        return ""
    root = m.group(0)
    return root.split("->")[0] if "->" in root and not root.startswith("ctx->buffers") and not root.endswith("->comm") \
        else root


def _events(a: Analysis) -> list[_Event]:
    ev = [_Event(l.where, l.function, l.line, l.loop, l.reads, l.writes) for l in a.launches]
    for c in a.collectives:
        reads = [c.send_buffer] if c.send_buffer else []
        if c.in_place or c.kind in ("broadcast",):
            reads.append(c.recv_buffer)
        writes = [c.recv_buffer] if c.recv_buffer else []
        ev.append(_Event(c.where, c.function, c.line, c.loop, tuple(r for r in reads if r), tuple(writes)))
    for s in a.syncs:
        if s.api in ("cudaMemcpy", "cudaMemcpyAsync") and len(s.args) >= 2:
            ev.append(_Event(f"{s.api}@L{s.line}", s.function, s.line, s.loop, (_root(s.args[1]),), (_root(s.args[0]),)))
    return sorted(ev, key=lambda e: (e.function, e.line))


def _producer(events: list[_Event], i: int, buf: str) -> _Event | None:
    me = events[i]
    for e in reversed(events[:i]):
        if e.function == me.function and buf in e.writes:
            return e
    if me.loop is not None:  # previous iteration: writers later in the same loop body
        for e in reversed(events[i + 1:]):
            if e.function == me.function and me.loop.line <= e.line <= me.loop.end_line and buf in e.writes:
                return e
    return None


def _consumers(events: list[_Event], i: int, buf: str) -> Iterable[_Event]:
    me = events[i]
    for e in events[i + 1:]:
        if e.function != me.function:
            break
        if buf in e.reads:
            yield e
        if buf in e.writes:
            return


def dataflow_edges(a: Analysis) -> list[Edge]:
    """Edges into and out of every collective."""
    events = _events(a)
    out: list[Edge] = []
    coll_where = {c.where for c in a.collectives}
    for i, e in enumerate(events):
        if e.where not in coll_where:
            continue
        for buf in e.reads:
            p = _producer(events, i, buf)
            if p is not None:
                out.append(Edge(p.where, e.where, buf))
        for buf in e.writes:
            for c in _consumers(events, i, buf):
                out.append(Edge(e.where, c.where, buf))
    return list(dict.fromkeys(out))
