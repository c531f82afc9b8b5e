"""Run a small search on a built-in workload and write its report.

    python examples/search_and_report.py RUN_DIR [--workload gemm_allgather] [--evals 24] [--world 2] [--modelled]

On a GPU machine every candidate is verified and timed by the harness (cuco.Evaluator). With --modelled (a CPU
machine) an analytic cost model stands in, and the report says so: no figure of such a run is a measurement.
"""

from __future__ import annotations

import argparse

import cuco
from cuco.design_space import Topology
from cuco.search import api


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--workload", default="gemm_allgather")
    ap.add_argument("--evals", type=int, default=24)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--modelled", action="store_true", help="no GPU: use the labelled cost model")
    a = ap.parse_args()

    wl = cuco.workloads.get(a.workload)
    shape = wl.bench_shapes[0]
    if a.modelled:
        evaluator = cuco.ModelledEvaluator(wl, shape, a.world)
    else:
        evaluator = cuco.Evaluator(wl, world=a.world, bench_shape=shape)
    space = wl.space(Topology(world=a.world, gin_available=False, nvshmem_available=False))
    print(f"{wl.name} at {shape}, world {a.world}: {len(list(space.points()))} legal design points")
    result = api.start(a.run_dir, wl, evaluator, space=space, seed=0, islands=2).run(a.evals)
    print(f"evaluated {result.evaluated} candidates ({result.evaluator_kind}): {result.counts}")
    best = result.best
    if best is not None:
        point = best.directives.label() if best.directives else best.mutation
        print(f"best: {point}, fitness {best.fitness:.3f} ({best.status})")
    print(f"report: {cuco.write_report(a.run_dir)}")


if __name__ == "__main__":
    main()
