"""Ring attention's merge accuracy across world sizes: the same global problem at W = 1, 2, 4, each point's output
against the plugin's fp32 reference, max |O - O_fp32| / max |O_fp32| (the harness's check of every rank, max over
ranks and seeds). The goal: at W = 4 at most max(2 x the W = 1 error, 2^-8), so merging more partials costs no
accuracy.

    python3 benchmarks/attention_merge_accuracy.py --worlds 1,2,4 --json OUT.json --md OUT.md \
        [--shape 8192,8,2,128,1] \
        [--points host,lsa/stream_overlap/signal/cta/whole/attend=ring,lsa/fused/world/cta/1MiB/attend=ring]

`host` is the workload's host-driven seed; a label illegal at some W is said and left out
there. Inputs are hashes of the global token index, so every W sees the same Q, K and V.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_POINTS = ("host,lsa/stream_overlap/signal/cta/whole/attend=ring,lsa/fused/world/cta/1MiB/attend=ring,"
                  "lsa/fused/world/cta/whole/attend=ring")
#: The relative max error the plugin's check message carries (attention_cp/plugin.cu).
REL_MAX = re.compile(r"max\|O-ref\|/max\|ref\|=([0-9.eE+-]+|nan|inf)")
FLOOR = 2.0 ** -8


def rel_max_of(messages: list[str]) -> float | None:
    """The largest relative max error the check messages of a candidate report (None: none reports one)."""
    found = [float(m.group(1)) for msg in messages for m in REL_MAX.finditer(msg)]
    return max(found) if found else None


def judge(table: dict[str, dict[int, float | None]]) -> dict[str, dict[str, object]]:
    """Per point: the W = 1 error, the bound max(2 x it, 2^-8), and whether every W > 1 stays within it."""
    out = {}
    for point, by_w in table.items():
        base = by_w.get(1)
        bound = max(2 * base, FLOOR) if base is not None else None
        within = None if bound is None else all(v is not None and v <= bound for w, v in by_w.items() if w > 1)
        out[point] = {"w1": base, "bound": bound, "within": within}
    return out


def _measure(shape: str, worlds: list[int], labels: list[str]) -> dict[str, dict[int, float | None]]:
    sys.path.insert(0, str(REPO / "src"))
    from cuco.design_space import Directives, Topology
    from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US
    from cuco.evaluate.compile import Compiler
    from cuco.harness.build import build_shared
    from cuco.harness.runner import HarnessRequest, run_harness
    from cuco.kit.compute import link_options
    from cuco.workloads import get

    wl = get("attention_cp")
    dims = wl.parse_shape(shape).dims
    compiler = Compiler()
    lk = link_options(wl, compiler.toolchain)
    plugin = build_shared(wl.plugin_path(), lk.libraries, include_dirs=lk.include_dirs, extra=lk.extra)

    def compile_codes(codes: list[str]) -> list[Path]:
        outcomes = compiler.compile_many(codes, lk.libraries, lk.include_dirs, lk.extra)
        bad = [o.log_excerpt for o in outcomes if not o.ok]
        if bad:
            raise SystemExit(f"a point did not compile: {bad[0]}")
        return [o.so_path for o in outcomes]

    table: dict[str, dict[int, float | None]] = {label: {} for label in labels}
    for world in worlds:
        space = wl.space(Topology(world=world, nodes=1, gin_available=False))
        codes, named = [], []
        for label in labels:
            if label == "host":
                codes.append(wl.seed_code())
            else:
                reason = space.check(Directives.from_label(label))
                if reason:
                    print(f"{label} left out at W = {world}: {reason}", flush=True)
                    continue
                codes.append(wl.render(Directives.from_label(label), Topology(world=world)))
            named.append(label)
        sos = compile_codes(codes)
        res = run_harness(HarnessRequest(plugin, sos, dims, world=world, seeds=(1, 2), verify=True, bench=False,
                                         timeout_s=120, delay_comm_us=DEFAULT_VERIFY_DELAY_US))
        by_path = {Path(r.path): r for r in res.candidates}
        for label, so in zip(named, sos):
            r = by_path[Path(so)]
            table[label][world] = rel_max_of([c.message for c in r.checks]) if r.status == "ok" else None
            print(f"W = {world} {label}: {r.status}, max|O-ref|/max|ref| = {table[label][world]}", flush=True)
    return table


def render(shape: str, table: dict[str, dict[int, float | None]], worlds: list[int], device: str) -> str:
    verdict = judge(table)
    lines = [f"# Ring attention merge accuracy, {shape} (S,HQ,HKV,D,CAUSAL) — {device}, "
             f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}", "",
             "| point | " + " | ".join(f"W = {w}" for w in worlds) + " | bound max(2 x W1, 2^-8) | within |",
             "|---|" + "---|" * (len(worlds) + 2)]
    for point, by_w in table.items():
        cells = [f"{by_w[w]:.3g}" if by_w.get(w) is not None else "—" for w in worlds]
        v = verdict[point]
        bound = f"{v['bound']:.3g}" if v["bound"] is not None else "—"
        lines.append(f"| `{point}` | " + " | ".join(cells) + f" | {bound} | {v['within']} |")
    lines += ["", "max |O - O_fp32| / max |O_fp32| over every rank's checked rows and both seeds, under delayed "
              "arrival; — where the point is not in the space at that W or did not verify."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="8192,8,2,128,1")
    ap.add_argument("--worlds", default="1,2,4")
    ap.add_argument("--points", default=DEFAULT_POINTS)
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    a = ap.parse_args()
    worlds = [int(w) for w in a.worlds.split(",")]
    labels = [x for x in a.points.split(",") if x]
    import torch

    table = _measure(a.shape, worlds, labels)
    device = torch.cuda.get_device_name(0)
    Path(a.json).write_text(json.dumps({"shape": a.shape, "device": device, "table": table,
                                        "verdict": judge(table)}, indent=1, default=str))
    Path(a.md).write_text(render(a.shape, table, worlds, device))
    print(Path(a.md).read_text())


if __name__ == "__main__":
    main()
