"""Prints the harness command line that re-times named points of a workload at one shape in the given order, as
one repeat of benchmarks/record.py does (parts, its warm-up, full-entropy inputs, bench only), so the same
repeat can be run under other environments, in process mode or under a debugger.

    python3 benchmarks/probes/harness_order/argv.py gemm_allgather 2 16384,8192,3584 best=LABEL,seed OUT.json
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from points import SEED, build_points  # noqa: E402
from record import WARM_MS  # noqa: E402

from cuco.harness.runner import HarnessRequest  # noqa: E402
from cuco.workloads import get  # noqa: E402


def main() -> int:
    workload, world, shape, order, out = sys.argv[1:6]
    names = [x.split("=")[-1] for x in order.split(",")]
    wl = get(workload)
    plugin, binary, built, _ = build_points(wl, names)
    bad = [n for n, o in built if not o.ok]
    if bad:
        raise SystemExit(f"does not compile: {bad}")
    sos = [o.so_path for _, o in built]
    req = HarnessRequest(plugin, sos, wl.parse_shape(shape).dims, world=int(world), seeds=(1,), inputs="full",
                         verify=False, bench=True, parts=True, warmup=5, iters=30, timeout_s=40, warm_ms=WARM_MS)
    print(" ".join(shlex.quote(a) for a in req.argv(binary, Path(out))))
    print(f"# order: {', '.join(n if n != SEED else 'host seed' for n in names)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
