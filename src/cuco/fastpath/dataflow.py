"""Dataflow between kernels, collectives and host copies: which launch produces what a collective sends,
which launch (or copy) consumes what it receives. Buffers are matched by storage class (provenance.py), so
an alias (`slot = kv + off`), a helper's pointer or a pool offset meets the allocation it points into; names
stand in where no class is known. Program order is line order inside one function; a collective inside a loop
also sees producers later in the loop body (the previous iteration)."""

from __future__ import annotations

import re
from typing import Hashable, Iterable, Sequence

import attrs

from cuco.fastpath.model import Analysis, Edge, Loop


@attrs.frozen
class _Event:
    where: str
    function: str
    line: int
    loop: Loop | None
    reads: tuple[Hashable, ...]     # storage class ids, or names where no class is known
    writes: tuple[Hashable, ...]


def _root(arg: str) -> str:
    """Root variable of a copy argument text: '(char*)h.data()' -> 'h', 'buf[r] + off' -> 'buf'."""
    text = re.sub(r"\([^()]*\*\s*\)", " ", arg)          # casts
    m = re.search(r"(ctx->buffers\[\d+\])|([A-Za-z_]\w*(?:->\w+)?)", text.replace("&", " "))
    if not m:
        return ""
    root = m.group(0)
    return root.split("->")[0] if "->" in root and not root.startswith("ctx->buffers") and not root.endswith("->comm") \
        else root


def _keys(names: Sequence[str], ids: Sequence[int]) -> tuple[Hashable, ...]:
    """Storage class where known (>= 0), else the name."""
    ids = list(ids) + [-1] * (len(names) - len(ids))
    return tuple(i if i >= 0 else n for n, i in zip(names, ids) if n)


def _events(a: Analysis) -> tuple[list[_Event], dict[tuple[str, str], str]]:
    """Events in program order, and (collective, 'read'|'write') -> the collective's name for that buffer."""
    names: dict[tuple[str, str], str] = {}
    ev = [_Event(l.where, l.function, l.line, l.loop, _keys(l.reads, l.read_storage), _keys(l.writes, l.write_storage))
          for l in a.launches]
    for c in a.collectives:
        send = _keys([c.send_buffer], [c.send_storage])
        recv = _keys([c.recv_buffer], [c.recv_storage])
        reads = list(send) + (list(recv) if c.in_place or c.kind == "broadcast" else [])
        names[(c.where, "read")] = c.send_buffer or c.recv_buffer
        names[(c.where, "write")] = c.recv_buffer
        ev.append(_Event(c.where, c.function, c.line, c.loop, tuple(dict.fromkeys(reads)), recv))
    for s in a.syncs:
        if s.api in ("cudaMemcpy", "cudaMemcpyAsync") and len(s.args) >= 2:
            dst, src = _keys([_root(s.args[0]), _root(s.args[1])], s.storage)[:2] if all(
                (_root(s.args[0]), _root(s.args[1]))) else ("", "")
            ev.append(_Event(f"{s.api}@L{s.line}", s.function, s.line, s.loop, (src,), (dst,)))
    return sorted(ev, key=lambda e: (e.function, e.line)), names


def _producer(events: list[_Event], i: int, buf: Hashable) -> _Event | None:
    me = events[i]
    for e in reversed(events[:i]):
        if e.function == me.function and buf in e.writes:
            return e
    if me.loop is not None:  # previous iteration: writers later in the same loop body
        for e in reversed(events[i + 1:]):
            if e.function == me.function and me.loop.line <= e.line <= me.loop.end_line and buf in e.writes:
                return e
    return None


def _consumers(events: list[_Event], i: int, buf: Hashable) -> Iterable[_Event]:
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
    events, names = _events(a)
    out: list[Edge] = []
    coll_where = {c.where for c in a.collectives}
    for i, e in enumerate(events):
        if e.where not in coll_where:
            continue
        for buf in e.reads:
            p = _producer(events, i, buf)
            if p is not None:
                out.append(Edge(p.where, e.where, names[(e.where, "read")]))
        for buf in e.writes:
            for c in _consumers(events, i, buf):
                out.append(Edge(e.where, c.where, names[(e.where, "write")]))
    return list(dict.fromkeys(out))
