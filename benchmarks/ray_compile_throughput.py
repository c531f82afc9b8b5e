"""Compiles per minute on this machine: the local executor (Compiler, one job per CPU) against Ray CPU workers
(one compile task per candidate), the same number of distinct GEMM+AllGather candidates each (fresh compiles: a
comment makes every source unique). Run on a CPU machine; prints one JSON line and a summary.

    python benchmarks/ray_compile_throughput.py [--n 6] [--cpus 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import time


def _codes(n: int, tag: str) -> list[str]:
    from cuco.design_space import Topology
    from cuco.workloads import get

    wl = get("gemm_allgather")
    points = [p for p in wl.space(Topology(world=2, gin_available=False, nvshmem_available=False)).points()][:n]
    stamp = f"{tag}-{time.time_ns()}"
    return [wl.render(p).replace("namespace cuco_ag {", f"// throughput run {stamp}\nnamespace cuco_ag {{", 1)
            for p in points]


def compile_one(code: str) -> bool:
    from cuco.evaluate.compile import Compiler
    from cuco.kit.compute import link_options
    from cuco.workloads import get

    c = Compiler(jobs=1)
    link = link_options(get("gemm_allgather"), c.toolchain)
    return c.compile(code, link.libraries, link.include_dirs, link.extra).ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    from cuco.evaluate.compile import Compiler
    from cuco.kit.compute import link_options
    from cuco.workloads import get

    link = link_options(get("gemm_allgather"), Compiler().toolchain)  # the compute library, built once, outside
    codes = _codes(a.n, "local")
    t0 = time.monotonic()
    ok_local = [o.ok for o in Compiler(jobs=a.cpus).compile_many(codes, link.libraries, link.include_dirs, link.extra)]
    local_s = time.monotonic() - t0

    import ray

    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    task = ray.remote(num_cpus=1)(compile_one)
    codes = _codes(a.n, "ray")
    t0 = time.monotonic()
    ok_ray = ray.get([task.remote(c) for c in codes])
    ray_s = time.monotonic() - t0
    ray.shutdown()
    row = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "cpus": a.cpus, "candidates": a.n, "ray": ray.__version__,
           "local_s": round(local_s, 1), "ray_s": round(ray_s, 1),
           "local_per_min": round(60 * a.n / local_s, 2), "ray_per_min": round(60 * a.n / ray_s, 2),
           "all_compiled": all(ok_local) and all(ok_ray)}
    print(json.dumps(row))
    print(f"local executor: {row['local_per_min']} compiles/min; Ray ({a.cpus} CPU workers): {row['ray_per_min']} "
          f"compiles/min ({a.n} GEMM+AllGather candidates each, {a.cpus} CPUs)")


if __name__ == "__main__":
    main()
