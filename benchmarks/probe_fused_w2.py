"""Where the fused placement's time goes at W = 2: the fused point and variants of it that drop one piece at a
time (flag waits, the pull kernel, the local block copy, SMs), timed in one harness run (no verification: the
variants without waits are wrong by design). Timing probe, not a benchmark of record.

    PYTHONPATH=src python3 benchmarks/probe_fused_w2.py --shapes '16384,8192,3584;8192,8192,8192' > probe.log
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from cuco.design_space import Directives
from cuco.evaluate.compile import Compiler
from cuco.harness.build import build_shared
from cuco.harness.runner import HarnessRequest, run_harness
from cuco.kit.compute import link_options
from cuco.toolchain import default_toolchain
from cuco.workloads import get

BASE = "lsa/fused/signal/cta/4MiB"
FLAGS = "a.flags = g.W > 1 ? f.chunk : nullptr;"
SMS = "a.sm_count = (ctx->sm_count - ncomm) & ~1;"
PULL = "if (ncomm > 0) {"
COPY = "if (cudaMemcpyAsync(a_full + (size_t)g.me"


def variants(code: str) -> dict[str, str]:
    for anchor in (FLAGS, SMS, PULL, COPY):
        assert anchor in code, anchor
    no_wait = code.replace(FLAGS, "a.flags = nullptr;")
    gemm_copy = no_wait.replace(PULL, "if (false) {")
    return {
        "fused": code,
        "fused_no_flag_waits": no_wait,
        "fused_24_fewer_gemm_sms": code.replace(SMS, "a.sm_count = (ctx->sm_count - ncomm - 24) & ~1;"),
        "local_copy_and_gemm_only": gemm_copy,
        "gemm_only_all_sms": gemm_copy.replace(COPY, "if (false && cudaMemcpyAsync(a_full + (size_t)g.me").replace(
            SMS, "a.sm_count = 0;"),
        "gemm_only_minus_ncomm_sms": gemm_copy.replace(COPY, "if (false && cudaMemcpyAsync(a_full + (size_t)g.me"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", default="16384,8192,3584;8192,8192,8192")
    a = ap.parse_args()
    wl = get("gemm_allgather")
    link = link_options(wl, default_toolchain())
    plugin = build_shared(wl.plugin_path(), link.libraries, include_dirs=link.include_dirs, extra=link.extra)
    codes = variants(wl.render(Directives.from_label(BASE)))
    codes["stream_overlap_ce"] = wl.render(Directives.from_label("lsa/stream_overlap/team/copy_engine/whole"))
    codes["host_seed"] = wl.seed_code()
    outs = Compiler().compile_many(list(codes.values()), link.libraries, link.include_dirs, link.extra)
    bad = [(n, o.log_excerpt) for n, o in zip(codes, outs) if not o.ok]
    assert not bad, bad[:1]
    sos = [o.so_path for o in outs]
    for shape in a.shapes.split(";"):
        dims = tuple(int(x) for x in shape.split(","))
        res = run_harness(HarnessRequest(plugin, sos, dims, world=2, seeds=(1,), verify=False, bench=True,
                                         parts=True, timeout_s=60))
        by = {Path(r.path): r for r in res.candidates}
        row = {"shape": shape}
        for name, so in zip(codes, sos):
            r = by[Path(so)]
            row[name] = r.time_ms if r.status == "ok" else f"{r.status}: {r.message[:200]}"
        row["parts"] = {n: (p.timing.max_median_ms if p.timing else p.status) for n, p in (res.parts or {}).items()}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
