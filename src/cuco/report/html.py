"""One self-contained HTML page of a run (no network: styles, script and data inline)."""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from html import escape
from pathlib import Path

from cuco import atomic
from cuco.candidate import NOT_RUN_HERE
from cuco.report import charts
from cuco.report.data import STATES, RunData, load_run
from cuco.report.timeline import overlap_us

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:3px 6px;font-size:12px;text-align:left}
.grid td.ok{background:#d9f2d9}.grid td.fail{background:#f8d7d7}.grid td.other{background:#eee}
.chart{width:100%;height:auto;background:#fafafa;border:1px solid #eee}.axis{font-size:11px;fill:#555}
.explore{fill:#e8eefc}.legend{font-size:12px;color:#555}.empty{color:#777;font-style:italic}
.tree{font:12px monospace}.tree li.path>details>summary,.tree li.path{font-weight:bold;color:#0a5}
pre.diff{font:12px monospace;background:#f7f7f7;padding:8px;overflow:auto;max-height:480px}
.add{color:#070}.del{color:#b00}.hunk{color:#06c}.missing{background:#fff4d6;padding:6px 10px}
rect.compute{fill:#1f77b4}rect.comm{fill:#ff7f0e}.kv td:first-child{color:#555}
"""

# Filters the failure list as the user types; marks the page ready (the headless-browser test checks it).
SCRIPT = """
document.addEventListener('DOMContentLoaded', function () {
  var box = document.getElementById('failfilter');
  if (box) box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    document.querySelectorAll('#failures li').forEach(function (li) {
      li.style.display = li.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
  var data = JSON.parse(document.getElementById('run-data').textContent);
  document.getElementById('ready').textContent = 'report of ' + data.candidates + ' candidates';
  document.body.dataset.ready = '1';
});
"""

REPORT_FILE = "report.html"

# In a <script> element, "</script" ends it and "<!--" followed by "<script" makes the parser skip the real end tag:
# JSON written there must hold no "<" (nor ">" and "&", for any parser that reads it as HTML).
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def script_json(value: object) -> str:
    """`value` as JSON safe inside an HTML <script> element (JSON.parse reads it back unchanged)."""
    return json.dumps(value).translate(_SCRIPT_SAFE)


def _kv(rows: list[tuple[str, object]]) -> str:
    return "<table class='kv'>" + "".join(f"<tr><td>{escape(k)}</td><td>{escape(str(v))}</td></tr>"
                                          for k, v in rows if v not in (None, "", {})) + "</table>"


def _evaluation(run: RunData) -> str | None:
    """How the run's figures were obtained, in one phrase that cannot contradict itself: the evaluator's kind
    and whether this run could verify and time (a CPU `cuco run` has a measuring evaluator but no GPU)."""
    if run.identity.get("evaluator_kind") == "modelled":
        return "modelled (a CPU cost model: no figure here was measured)"
    evaluation = run.summary.get("evaluation")
    if evaluation is None and run.candidates:  # no summary: what the candidates' results say
        ran = any(r.passed or not r.data.get(NOT_RUN_HERE) for c in run.candidates
                  for lv, r in c.results.items() if lv in ("verify", "bench"))
        evaluation = "measured" if ran else "unmeasured"
    return {"measured": "measured: verified and timed on GPUs",
            "unmeasured": "not measured: no GPU where it ran, so candidates were statically checked and compiled "
                          "only"}.get(str(evaluation), evaluation)


def _driver(env: dict[str, object]) -> str | None:
    """The NVIDIA driver's release (e.g. 580.159.04); where a run recorded only the CUDA version its driver
    supports (cuDriverGetVersion, e.g. 13.0), that, said as such."""
    if env.get("driver_release"):
        return str(env["driver_release"])
    return f"supports CUDA {env['driver_version']}" if env.get("driver_version") else None


def _environment(run: RunData) -> list[tuple[str, object]]:
    env = dict(run.summary.get("environment") or {})
    best = run.best()
    bench = best.results.get("bench") if best else None
    for key in ("device", "nccl_version", "cuda_runtime_version", "driver_version", "driver_release", "date"):
        if bench and bench.data.get(key) and not env.get(key):
            env[key] = bench.data[key]
    tc = run.manifest.get("toolchain") or {}
    return [("workload", run.workload), ("run directory", run.run_dir), ("shape", run.manifest.get("shape")),
            ("world", run.manifest.get("world")), ("run", STATES[run.state]), ("evaluation", _evaluation(run)),
            ("device", env.get("device") or run.manifest.get("device")), ("NCCL", env.get("nccl_version")
                                                                            or tc.get("nccl")),
            ("CUDA", env.get("cuda_runtime_version") or tc.get("cuda")), ("driver", _driver(env)),
            ("cuco", run.manifest.get("cuco_version")), ("started", run.manifest.get("created_at")),
            ("measured", env.get("date"))]


def _best_section(run: RunData) -> str:
    best = run.best()
    if best is None:
        return "<p class='empty'>No candidate passed verification and timing yet.</p>"
    m = best.metrics
    rows = [("status", best.status if best.status == "passed" else f"{best.status}: fitness from a model, not "
             "measured"), ("candidate", best.id), ("point", charts.label(best)), ("how", best.mutation),
            ("time ms", m.get("time_ms")), ("host program ms", m.get("host_ms")), ("speedup", m.get("speedup")),
            ("bound ms", m.get("bound_ms")), ("overlap efficiency", m.get("overlap_efficiency"))]
    out = [_kv(rows)]
    by_id = run.by_id()
    parent = by_id.get(best.parent_id or "")
    fast = run.fastpath()
    if parent is not None:
        same = " (the fast-path candidate)" if fast is not None and parent.id == fast.id else ""
        out.append(f"<h3>Against its parent ({escape(parent.id[:8])}, {escape(charts.label(parent))}){same}</h3>")
        out.append(_diff(parent.code, best.code, "parent"))
    if fast is not None and fast.id != best.id and (parent is None or parent.id != fast.id):
        out.append("<h3>Against the fast-path candidate</h3>")
        out.append(_diff(fast.code, best.code, "fast path"))
    return "".join(out)


def _diff(old: str, new: str, name: str) -> str:
    """The diff of the EVOLVE blocks when both programs have them (the frozen rest is the same by
    construction), else of the whole files."""
    from cuco.kit.evolve import split  # noqa: PLC0415

    try:
        a, b, what = split(old)[1], split(new)[1], "EVOLVE block"
    except Exception:  # noqa: BLE001 - a program without (or with several) blocks: compare whole files
        a, b, what = old, new, "whole program"
    return f"<p class='legend'>{what}</p>" + charts.diff_block(a, b, name, "best")


def _failures(run: RunData) -> str:
    groups: dict[str, list[str]] = defaultdict(list)
    for c in run.candidates:
        level = charts.failed_level(c)
        if level:
            reason = next((r.reason for r in c.results.values() if not r.passed), "")
            groups[level].append(f"{c.id[:8]} {charts.label(c)}: {reason[:600]}")
    if not groups:
        return "<p class='empty'>No failures.</p>"
    out = ["<input id='failfilter' placeholder='filter failures'><ul id='failures'>"]
    for level in ("static", "compile", "verify", "bench"):
        for msg in groups.get(level, []):
            out.append(f"<li><b>{level}</b> {escape(msg)}</li>")
    out.append("</ul>")
    counts = ", ".join(f"{level}: {len(v)}" for level, v in groups.items())
    return f"<p>{escape(counts)}</p>" + "".join(out)


def _llm(run: RunData) -> str:
    calls = sum(1 for r in run.spend if r.get("op") == "reserve")
    settled = {r.get("id"): r for r in run.spend if r.get("op") == "settle"}
    cost = sum(float(r.get("usd", 0)) for r in settled.values())
    tokens_in = sum(int(r.get("prompt_tokens", 0) or 0) for r in settled.values())
    tokens_out = sum(int(r.get("completion_tokens", 0) or 0) for r in settled.values())
    models = Counter(str(r.get("model")) for r in run.spend if r.get("op") == "reserve")
    ops = Counter(c.mutation for c in run.candidates)
    rows = [("LLM calls", calls), ("settled cost USD", f"{cost:.4f}"), ("prompt tokens", tokens_in),
            ("completion tokens", tokens_out), ("calls in flight or abandoned", calls - len(settled)),
            ("models", ", ".join(f"{m} ×{n}" for m, n in models.items()) or "none"),
            ("candidates by mutation", ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))]
    return _kv(rows)


def _timelines(run: RunData, out_dir: Path) -> str:
    if not run.timelines:
        return ("<p class='empty'>No traced run in this directory (traces are written by a GPU run into "
                f"{escape(str(run.run_dir / 'timeline'))}).</p>")
    parts = []
    for path in run.timelines:
        try:
            trace = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            parts.append(f"<p class='missing'>{escape(path.name)} is unreadable.</p>")
            continue
        rel = os.path.relpath(path, out_dir)
        both = overlap_us(trace)
        parts.append(f"<h3>{escape(path.stem)}</h3>{charts.timeline_svg(trace)}<p>compute and communication "
                     f"overlap for {both:.0f} µs. <a href='{escape(rel)}'>"
                     f"{escape(path.name)}</a> — open it in the Perfetto UI (ui.perfetto.dev) for the full view.</p>")
    return "".join(parts)


def render(run: RunData, out_dir: Path) -> str:
    """The report page of `run` (links relative to `out_dir`)."""
    best = run.best()
    highlight = set()
    by_id = run.by_id()
    c = best
    while c is not None and c.id not in highlight:
        highlight.add(c.id)
        c = by_id.get(c.parent_id or "")
    missing = "".join(f"<p class='missing'>Partial report: missing {escape(m)}.</p>" for m in run.missing)
    data = script_json({"candidates": len(run.candidates), "workload": run.workload})
    sections = [
        ("Run", _kv(_environment(run))),
        ("Best fitness over evaluations", charts.fitness_chart(run.candidates, run.phases())),
        ("Best candidate", _best_section(run)),
        ("Design space tried", charts.space_grid(run.candidates)),
        ("Lineage", charts.lineage_tree(run.candidates, highlight)),
        ("Failures by level", _failures(run)),
        ("LLM use", _llm(run)),
        ("Timeline", _timelines(run, out_dir)),
    ]
    body = "".join(f"<h2>{escape(t)}</h2>{html}" for t, html in sections)
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>cuco run — {escape(run.workload)}</title><style>{CSS}</style></head><body>"
            f"<h1>cuco run — {escape(run.workload)}</h1><p id='ready'></p>{missing}{body}"
            f"<script type='application/json' id='run-data'>{data}</script><script>{SCRIPT}</script>"
            "</body></html>")


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of the run in `run_dir` (default `RUN_DIR/report.html`) atomically; returns its path."""
    run = load_run(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, render(run, path.parent))
    return path
