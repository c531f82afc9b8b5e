"""The fast path on the example host programs (tests/fixtures/host_programs): per program, analyse and
transform it with the rules (no LLM), compile the original and the transform, run both at world size 1 and
compare their checksum lines with each other and with the manifest. Writes a markdown table and a log.

    PYTHONPATH=src python3 benchmarks/fastpath_corpus.py --out benchmarks/results/fastpath_corpus.md

`--originals-only` compiles and runs only the original programs (to record their checksums).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cuco.fastpath import verify
from cuco.fastpath.analyze import analyze
from cuco.fastpath.model import FastPathError
from cuco.fastpath.transform import transform

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "host_programs"


def _transform(path: Path) -> dict[str, Any]:
    text = path.read_text()
    a = analyze(text, path.name)
    row: dict[str, Any] = {"program": path.stem, "collectives": sorted({c.name for c in a.collectives}),
                           "launch_model": getattr(a, "launch_model", "?")}
    try:
        t = transform(a, text)
        row.update(status="rules", rules=list(t.rules_applied), code=t.code, reason="")
    except FastPathError as exc:
        row.update(status="refused", rules=[], code=None, reason=str(exc).split("\n", 1)[-1].strip())
    return row


def _build(code: str, work: Path) -> verify.BuildOutcome:
    return verify.build(code, workdir=work, include_dirs=[CORPUS], name=work.name)


def _gpu_name() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or "no GPU"
    except (OSError, subprocess.SubprocessError):
        return "no GPU"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fastpath_corpus.md")
    ap.add_argument("--log", type=Path, help="full log (default: OUT with .log)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fastpath_corpus"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--originals-only", action="store_true")
    ap.add_argument("--no-run", action="store_true", help="compile only (no GPU)")
    args = ap.parse_args()
    os.environ.update(CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0], WORLD_SIZE="1")
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    programs = sorted(CORPUS.glob("*.cu"))
    t0 = time.time()
    rows = [{"program": p.stem, "status": "not analysed", "code": None} if args.originals_only else _transform(p)
            for p in programs]
    jobs = [(i, "original", p.read_text()) for i, p in enumerate(programs)]
    jobs += [(i, "device", r["code"]) for i, r in enumerate(rows) if r["code"]]
    with ThreadPoolExecutor(args.jobs) as pool:
        built = list(pool.map(lambda j: (j[0], j[1], _build(j[2], args.work / rows[j[0]]["program"] / j[1])), jobs))
    for i, kind, b in built:
        rows[i][f"{kind}_build"] = b
    log: list[str] = []
    for p, r in zip(programs, rows):
        expect = manifest["programs"].get(p.stem, {}).get("checksums_w1")
        for kind in ("original", "device"):
            b = r.get(f"{kind}_build")
            if b is None or not b.ok or args.no_run:
                continue
            out = verify.run_program(b.binary, timeout_s=120)
            r[f"{kind}_run"] = out
            log.append(f"== {p.stem} {kind} (exit ok={out.ok})\n{out.output.strip()}\n")
        o, d = r.get("original_run"), r.get("device_run")
        r["original_matches_manifest"] = bool(o and o.ok and expect is not None and list(o.checksums) == expect)
        r["equal_w1"] = bool(o and d and o.ok and d.ok and o.checksums and o.checksums == d.checksums)
    header = (f"Device: {_gpu_name()}; host {platform.node()}; NCCL {verify.host_toolchain().nccl.version} "
              f"({verify.host_toolchain().nccl.origin}); nvcc {verify.host_toolchain().cuda_version}; "
              f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; world size 1; "
              f"{time.time() - t0:.0f} s in all")
    table = ["| program | collectives | launch model | rules or refused (reason) | compiled | original = manifest "
             "| checksums equal at W = 1 |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        how = "rules: " + ", ".join(r.get("rules", [])) if r["status"] == "rules" else \
            f"{r['status']}: {r.get('reason', '')}".replace("\n", " ").replace("|", "\\|")
        comp = "/".join("yes" if r.get(f"{k}_build") and r[f"{k}_build"].ok else
                        ("no" if r.get(f"{k}_build") else "-") for k in ("original", "device"))
        table.append(f"| {r['program']} | {', '.join(r.get('collectives', []))} | {r.get('launch_model', '')} | {how} "
                     f"| {comp} | {'yes' if r['original_matches_manifest'] else 'no'} "
                     f"| {'yes' if r['equal_w1'] else 'no'} |")
    by_rules = sum(r["status"] == "rules" for r in rows)
    summary = (f"{by_rules} of {len(rows)} programs transformed by the rules with 0 LLM calls "
               f"({100.0 * by_rules / len(rows):.0f}%); checksums equal at W = 1 for "
               f"{sum(r['equal_w1'] for r in rows)}; originals matching the manifest: "
               f"{sum(r['original_matches_manifest'] for r in rows)}.")
    text = "\n".join(["# Fast path on the example host programs", "", header, "", summary, "", *table, ""])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    for r in rows:
        for k in ("original", "device"):
            b = r.get(f"{k}_build")
            if b is not None and not b.ok:
                log.append(f"== {r['program']} {k} build failed\n{b.log[-3000:]}\n")
    (args.log or args.out.with_suffix(".log")).write_text(header + "\n\n" + "\n".join(log))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
