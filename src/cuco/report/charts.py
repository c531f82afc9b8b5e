"""Inline SVG and HTML fragments of a run report: fitness over evaluations, the design-space grid, the lineage
tree, a diff, and a per-rank timeline. Pure functions of plain data; every string they embed is escaped."""

from __future__ import annotations

import difflib
import math
from collections import defaultdict
from html import escape
from typing import Any, Iterable, Sequence

from cuco.candidate import RANKED_STATUSES, Candidate

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


# Colours and sizes as SVG attributes, not only classes: a chart shown outside the report (a notebook's
# display(HTML(...))) has none of the report's CSS, and an unstyled rect is filled black.
BACKGROUND, EXPLORE, AXIS = "#fafafa", "#e8eefc", "#555"
COMPUTE, COMM = "#1f77b4", "#ff7f0e"


def finite(value: object) -> float | None:
    """`value` as a finite float, else None (NaN, ±inf, text): what a chart may place."""
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _svg(width: int, height: int, what: str) -> str:
    return (f"<svg class='chart' xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {width} {height}' width='{width}' "
            f"height='{height}' style='max-width:100%;height:auto' font-family='sans-serif' role='img' "
            f"aria-label='{what}'><rect width='{width}' height='{height}' fill='{BACKGROUND}'/>")


def _axis_text(x: float, y: float, text: str) -> str:
    return f"<text x='{x:.1f}' y='{y:.1f}' class='axis' font-size='11' fill='{AXIS}'>{text}</text>"


def label(c: Candidate) -> str:
    """A candidate's design point, or how it came to be when it has none."""
    return c.directives.label() if c.directives is not None else c.mutation


def failed_level(c: Candidate) -> str | None:
    """The cascade level a candidate failed at, or None when it did not fail."""
    status = c.status
    return status.split(":", 1)[1] if status.startswith("failed:") else None


def fitness_chart(cands: Sequence[Candidate], phases: Sequence[str], width: int = 760, height: int = 260) -> str:
    """Best fitness so far per island (step lines) and each evaluated candidate (dots; failures as crosses at
    the bottom), over evaluations; the explore phase is shaded."""
    n = len(cands)
    if n == 0:
        return "<p class='empty'>No evaluations yet.</p>"
    fit = [finite(c.fitness) for c in cands]  # NaN, ±inf or text: no point to place, shown as unranked
    fits = [f for f in fit if f is not None]
    lo, hi = (min(fits), max(fits)) if fits else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad_l, pad_b, pad_t = 48, 28, 12
    x = lambda i: pad_l + (width - pad_l - 10) * (i + 0.5) / n  # noqa: E731
    y = lambda f: pad_t + (height - pad_t - pad_b) * (1 - (f - lo) / (hi - lo))  # noqa: E731
    parts = [_svg(width, height, "fitness over evaluations")]
    explore = [i for i, p in enumerate(phases) if p == "explore"]
    if explore:
        parts.append(f"<rect x='{x(explore[0]) - 2:.1f}' y='{pad_t}' width='{x(explore[-1]) - x(explore[0]) + 4:.1f}' "
                     f"height='{height - pad_t - pad_b}' class='explore' fill='{EXPLORE}'><title>explore phase</title>"
                     "</rect>")
    for f in (lo, hi):
        parts.append(_axis_text(4, y(f) + 4, f"{f:.3g}"))
    parts.append(_axis_text(pad_l, height - 6, f"evaluation 1 … {n} (speedup over the host program; higher is "
                            "better)"))
    best: dict[int, float] = {}
    lines: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for i, c in enumerate(cands):
        f = fit[i]
        if f is not None and c.status in RANKED_STATUSES and f > best.get(c.island, float("-inf")):
            best[c.island] = f
        if c.island in best:
            pts = lines[c.island]
            if pts and pts[-1][1] != y(best[c.island]):
                pts.append((x(i), pts[-1][1]))  # a step: the best so far holds until it improves
            pts.append((x(i), y(best[c.island])))
    for isl, pts in sorted(lines.items()):
        colour = PALETTE[isl % len(PALETTE)]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in pts)
        parts.append(f"<polyline points='{path}' fill='none' stroke='{colour}' stroke-width='2'>"
                     f"<title>island {isl}: best so far</title></polyline>")
    for i, c in enumerate(cands):
        colour = PALETTE[c.island % len(PALETTE)]
        tip = escape(f"#{i + 1} {label(c)} ({c.mutation}, island {c.island}): {c.status}"
                     + (f", fitness {c.fitness}" if c.fitness is not None else ""))
        if fit[i] is not None:
            parts.append(f"<circle cx='{x(i):.1f}' cy='{y(fit[i]):.1f}' r='3' fill='{colour}'><title>{tip}"
                         "</title></circle>")
        elif c.failed:
            yb = height - pad_b + 6
            parts.append(f"<path d='M{x(i) - 3:.1f},{yb - 3} l6,6 m0,-6 l-6,6' stroke='#d62728'><title>{tip}</title>"
                         "</path>")
    parts.append("</svg>")
    legend = " ".join(f"<span style='color:{PALETTE[i % len(PALETTE)]}'>■ island {i}</span>"
                      for i in sorted({c.island for c in cands}))
    return "".join(parts) + f"<div class='legend'>{legend}; shaded: explore phase; ✕ failed</div>"


def space_grid(cands: Iterable[Candidate]) -> str:
    """Tried design points as a grid: rows are (backend, placement, sync scope), columns the rest; each cell
    shows the best fitness there, or the level where its tries failed."""
    cells: dict[tuple[str, str], list[Candidate]] = defaultdict(list)
    for c in cands:
        if c.directives is None:
            continue
        parts = c.directives.label().split("/")
        cells[("/".join(parts[:3]), "/".join(parts[3:]))].append(c)
    if not cells:
        return "<p class='empty'>No design points tried yet.</p>"
    rows = sorted({r for r, _ in cells})
    cols = sorted({k for _, k in cells})
    out = ["<table class='grid'><tr><th>backend/placement/sync</th>",
           *(f"<th>{escape(k)}</th>" for k in cols), "</tr>"]
    for r in rows:
        out.append(f"<tr><th>{escape(r)}</th>")
        for k in cols:
            tried = cells.get((r, k), [])
            if not tried:
                out.append("<td></td>")
                continue
            fits = [f for c in tried if (f := finite(c.fitness)) is not None and c.status in RANKED_STATUSES]
            if fits:
                out.append(f"<td class='ok' title='{len(tried)} tries'>{max(fits):.3g}</td>")
            else:
                levels = sorted({failed_level(c) or c.status for c in tried})
                cls = "fail" if any(failed_level(c) for c in tried) else "other"
                out.append(f"<td class='{cls}' title='{len(tried)} tries'>{escape(', '.join(levels))}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def lineage_tree(cands: Sequence[Candidate], highlight: set[str]) -> str:
    """Parent → child tree (roots: seeds and the fast path); the best candidate's ancestry highlighted."""
    ids = {c.id for c in cands}
    children: dict[str | None, list[Candidate]] = defaultdict(list)
    for c in cands:
        children[c.parent_id if c.parent_id in ids else None].append(c)

    def node(c: Candidate, depth: int) -> str:
        fit = f" fitness {c.fitness:.4g}" if finite(c.fitness) is not None else \
            f" fitness {c.fitness}" if c.fitness is not None else ""
        cls = " class='path'" if c.id in highlight else ""
        text = escape(f"{c.id[:8]} {c.mutation} {label(c)} — {c.status}{fit}")
        kids = children.get(c.id, [])
        if not kids or depth > 60:
            return f"<li{cls}>{text}</li>"
        inner = "".join(node(k, depth + 1) for k in kids)
        return f"<li{cls}><details open><summary>{text}</summary><ul>{inner}</ul></details></li>"

    roots = children.get(None, [])
    return "<ul class='tree'>" + "".join(node(r, 0) for r in roots) + "</ul>" if roots else \
        "<p class='empty'>No candidates yet.</p>"


def diff_block(old: str, new: str, old_name: str, new_name: str, context: int = 3, max_lines: int = 400) -> str:
    """A unified diff as coloured HTML lines (+ added, - removed)."""
    lines = list(difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, n=context,
                                      lineterm=""))
    if not lines:
        return "<p class='empty'>Identical.</p>"
    cut = len(lines) > max_lines
    body = []
    for line in lines[:max_lines]:
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line.startswith("@@") \
            else ""
        body.append(f"<span class='{cls}'>{escape(line)}</span>")
    more = f"\n… {len(lines) - max_lines} more lines" if cut else ""
    return "<pre class='diff'>" + "\n".join(body) + escape(more) + "</pre>"


def timeline_svg(trace: dict[str, Any], width: int = 760, lane_h: int = 18) -> str:
    """A Chrome-trace (complete events, 'ph': 'X') as lanes per rank and stream; compute and communication
    coloured apart (event 'cat')."""
    # an event whose time or length is not a finite number cannot be placed: left out, not a crash
    events = [e for e in trace.get("traceEvents", []) if isinstance(e, dict) and e.get("ph") == "X"
              and finite(e.get("ts")) is not None and finite(e.get("dur")) is not None]
    if not events:
        return "<p class='empty'>The trace holds no kernel or copy events.</p>"
    t0 = min(float(e["ts"]) for e in events)
    t1 = max(float(e["ts"]) + float(e["dur"]) for e in events)
    span = max(t1 - t0, 1e-9)
    lanes = sorted({(str(e.get("pid")), str(e.get("tid"))) for e in events})
    left = 150
    height = lane_h * len(lanes) + 24
    out = [_svg(width, height, "timeline")]
    for k, (pid, tid) in enumerate(lanes):
        out.append(_axis_text(2, k * lane_h + 13, f"{escape(pid)} · {escape(tid)}"))
    for e in events:
        k = lanes.index((str(e.get("pid")), str(e.get("tid"))))
        x0 = left + (width - left - 4) * (float(e["ts"]) - t0) / span
        w = max((width - left - 4) * float(e["dur"]) / span, 0.5)
        cls, fill = ("comm", COMM) if e.get("cat") == "communication" else ("compute", COMPUTE)
        tip = escape(f"{e.get('name', '?')} ({e.get('cat', '?')}): {float(e['dur']):.1f} µs")
        out.append(f"<rect x='{x0:.1f}' y='{k * lane_h + 2}' width='{w:.1f}' height='{lane_h - 4}' class='{cls}' "
                   f"fill='{fill}'><title>{tip}</title></rect>")
    out.append(_axis_text(left, height - 6, f"{span:.0f} µs; blue compute, orange communication") + "</svg>")
    return "".join(out)
