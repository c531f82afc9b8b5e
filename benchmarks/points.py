"""A workload's named points (its fast-path candidate, the best points its results files record, its host-driven seed,
or any directive label) built through the cascade's own path: the fast-path agent, the workload's renderer, the
cascade's compiler with the workload's link options, and the cached harness binary. benchmarks/sanitize.py and
benchmarks/graph_replay.py run the harness on what this builds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

RESULTS = ROOT / "benchmarks" / "results"
#: Point names that are not directive labels: the fast path's rewrite of the seed, and the host-driven seed itself.
FAST_PATH, SEED = "fastpath", "seed"


def best_points(workload: str, world: int, results: Path = RESULTS) -> list[str]:
    """The distinct best points (directive labels, in row order) of the workload's results file at `world`, else at
    W = 1 (`<results>/<workload>_w<W>.json`, or `<workload>.json`). Rows whose best is the fast path or the seed
    name no label and are left out. SystemExit when no file names one."""
    for w in (world, 1):
        path = results / (f"{workload}_w{w}.json" if (results / f"{workload}_w{w}.json").exists() else
                          f"{workload}.json")
        if path.exists():
            rows = json.loads(path.read_text()).get("rows", [])
            labels = [str(r["best_point"]) for r in rows if "/" in str(r.get("best_point", ""))]
            if labels:
                return list(dict.fromkeys(labels))
    raise SystemExit(f"no results file of {workload} names a best point; run its benchmark first")


def add_point_arguments(ap: Any) -> None:
    """The arguments of a script that times named points of one workload at one shape (retime_points.py,
    compare_points.py): --workload, --world, --shape, --points, --iters."""
    ap.add_argument("--workload", required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--shape", required=True, help="the workload's shape name or dims, as its benchmark takes")
    ap.add_argument("--points", required=True, help="comma-separated: fastpath and/or directive labels")
    ap.add_argument("--iters", type=int, default=30)


def point_names(text: str) -> list[str]:
    """The point names of a --points value, in order, each once; SystemExit for none, or for the host seed (every
    such script times it anyway)."""
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names:
        raise SystemExit("--points names no point")
    if "host" in names or SEED in names:
        raise SystemExit("--points: the host seed is always timed; name only the fast path and labels")
    return names


def point_codes(workload: Any, names: Sequence[str], include_dirs: Sequence[Path] | None = None) -> dict[str, str]:
    """Source code per point name: FAST_PATH (the rule-based fast-path agent over the seed, no LLM, no GPU), SEED
    (the host-driven seed), or a directive label rendered by the workload. The fast path compiles the seed's rewrite
    with `include_dirs`, by default the workload's own (cuco.fastpath_cache.compute_includes: a seed that includes
    its compute library's header does not compile without it). SystemExit for a label it cannot render."""
    from cuco.design_space import Directives
    from cuco.fastpath.agent import FastPathAgent
    from cuco.fastpath_cache import compute_includes

    codes: dict[str, str] = {}
    for name in names:
        if name == FAST_PATH:
            if include_dirs is None:
                include_dirs = compute_includes(workload)
            codes[name] = FastPathAgent(llm=None, check_input=False, run_on_gpu=False,
                                        include_dirs=list(include_dirs)).run(workload.seed_code()).code
        elif name == SEED:
            codes[name] = workload.seed_code()
        else:
            try:
                codes[name] = workload.render(Directives.from_label(name))
            except Exception as exc:  # noqa: BLE001 - any refusal of a label is the user's to fix
                raise SystemExit(f"point {name!r} is not a directive label {workload.name} renders: {exc}") from None
    return codes


def build_points(workload: Any, names: Sequence[str]) -> tuple[Path, Path, list[tuple[str, Any]], Any]:
    """Builds the workload's plugin, the harness binary and every named point (in parallel, cached).

    Returns (plugin, harness binary, [(name, CompileOutcome)] in the order given, toolchain)."""
    from cuco.evaluate.compile import Compiler
    from cuco.harness.build import build_shared, harness_binary
    from cuco.kit.compute import link_options

    compiler = Compiler()
    link = link_options(workload, compiler.toolchain)
    plugin = build_shared(workload.plugin_path(), link.libraries, include_dirs=link.include_dirs, extra=link.extra)
    codes = point_codes(workload, names, link.include_dirs)
    outcomes = compiler.compile_many(list(codes.values()), link.libraries, link.include_dirs, link.extra)
    return plugin, harness_binary(compiler.toolchain), list(zip(codes, outcomes)), compiler.toolchain
