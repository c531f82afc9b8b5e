"""Diagnostic variant of a stream_overlap point whose knobs come from the environment (measurement only):
AG_NCOMM (comm CTAs), AG_FULL (local-rows GEMM on all SMs), AG_SKIP (no communication: wrong results, timing
of the GEMM split alone; bench it with the driver's --force-bench 1)."""

from __future__ import annotations

import sys
from pathlib import Path

from cuco.design_space import Directives
from cuco.workloads.gemm_allgather import WORKLOAD


def probe_source(label: str) -> str:
    text = WORKLOAD.render(Directives.from_label(label))
    subs = [
        ("#include <stdint.h>\n", "#include <stdint.h>\n#include <stdlib.h>\n"),
        ("const int ncomm = comm_ctas(g);",
         'const int ncomm = getenv("AG_NCOMM") ? atoi(getenv("AG_NCOMM")) : comm_ctas(g);\n'
         '  const bool skip = getenv("AG_SKIP") != nullptr;'),
        ("@PRE@", ""),
        ("  pull_kernel<<<", "  if (!skip) pull_kernel<<<"),
        ("ctx->sm_count - ncomm, main);", '(getenv("AG_FULL") ? 0 : ctx->sm_count - ncomm), main);'),
        ("if ((rc = stream_wait_epoch(", "if (!skip && (rc = stream_wait_epoch("),
    ]
    for old, new in subs:
        if old != "@PRE@" and old not in text:
            raise SystemExit(f"probe: pattern not found: {old!r}")
        text = text.replace(old, new)
    return text


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(probe_source(sys.argv[1]))
