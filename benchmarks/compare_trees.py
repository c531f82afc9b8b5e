"""Two versions of the library side by side on one machine: compare_points.py's named points (and the host seed)
timed with this tree's `src/` and with another tree's, one harness process per round and tree. The trees alternate,
and the order reverses every other round, so drift in clocks or temperature falls on both. Every round verifies.
Prints per tree and point the median over rounds, and per point the median of the per-round ratios other / this.
For judging a library change before it lands. Figures of record come from benchmarks/record.py.

    python3 benchmarks/compare_trees.py --other /tmp/new --rounds 3 --json out.json -- \\
        --workload moe --world 2 --shape paper-r1 --points lsa/deferred/world/cta/whole/dispatch_dtype=bf16

--other names a tree root holding `src/` and `csrc/` (e.g. `git archive COMMIT src csrc | tar x -C DIR`).
Exit 1 when a round fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TREES = ("this", "other")


def round_order(i: int) -> tuple[str, str]:
    """The trees' order in round i: this first in even rounds, other first in odd ones."""
    return TREES if i % 2 == 0 else TREES[::-1]


def summarise(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """From each tree's compare_points rows (one per round, in round order): per tree the median of every timed
    label over its rounds, and per label the median of the per-round ratios other / this (rounds where both timed
    it)."""
    medians: dict[str, dict[str, float]] = {}
    for tree, runs in rows.items():
        labels = dict.fromkeys(k for r in runs for k in r.get("medians_ms", {}))
        medians[tree] = {k: statistics.median(v) for k in labels
                         if (v := [r["medians_ms"][k] for r in runs if r["medians_ms"].get(k) is not None])}
    ratios: dict[str, float] = {}
    for k in medians.get("this", {}):
        pairs = [(a["medians_ms"].get(k), b["medians_ms"].get(k)) for a, b in zip(rows["this"], rows["other"])]
        per_round = [b / a for a, b in pairs if a and b]
        if per_round:
            ratios[k] = statistics.median(per_round)
    return {"medians_ms": medians, "other_over_this": ratios}


def run_round(tree: str, other: Path, args: Sequence[str]) -> dict[str, Any]:
    """One compare_points.py process (one repeat, verified) with `tree`'s src/ first on the path. The other tree's
    rows name its commit as CUCO_OTHER_COMMIT says (else `other:<its path>`): it carries no git history here."""
    src = ROOT / "src" if tree == "this" else other / "src"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]))
    if tree == "other":
        env["CUCO_COMMIT"] = os.environ.get("CUCO_OTHER_COMMIT", f"other:{other}")
    with tempfile.TemporaryDirectory(prefix="cuco-compare-trees-") as tmp:
        out = Path(tmp) / "row.json"
        done = subprocess.run([sys.executable, str(HERE / "compare_points.py"), *args, "--repeats", "1",
                               "--json", str(out)], env=env, capture_output=True, text=True)
        if not out.is_file():
            raise RuntimeError(f"the {tree} tree's round wrote no row (exit {done.returncode}): "
                               f"{(done.stdout + done.stderr)[-1500:]}")
        row = json.loads(out.read_text())
    row["exit"] = done.returncode
    return row


def compare(rounds: int, other: Path, args: Sequence[str],
            run: Callable[[str, Path, Sequence[str]], dict[str, Any]] = run_round) -> dict[str, Any]:
    """`rounds` rounds of both trees in alternating order; the rows and their summary."""
    rows: dict[str, list[dict[str, Any]]] = {t: [] for t in TREES}
    for i in range(rounds):
        for tree in round_order(i):
            rows[tree].append(run(tree, other, args))
    failed = [(t, i + 1, r["statuses"]) for t in TREES for i, r in enumerate(rows[t]) if r.get("exit")]
    return {"rounds": rounds, "other": str(other), "args": list(args), "rows": rows, "failed": failed,
            **summarise(rows)}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("pass compare_points.py's arguments after --: --workload, --world, --shape, --points")
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--other", type=Path, required=True, help="another tree's root (src/ and csrc/)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv[:split])
    if a.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    missing = [d for d in ("src", "csrc") if not (a.other / d).is_dir()]
    if missing:
        raise SystemExit(f"--other {a.other} has no {' or '.join(d + '/' for d in missing)}: give a tree root, e.g. "
                         f"`git archive COMMIT src csrc | tar x -C DIR`")
    result = compare(a.rounds, a.other.resolve(), argv[split + 1:])
    text = json.dumps(result, indent=1)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(text)
    for label, ratio in result["other_over_this"].items():
        this, other = result["medians_ms"]["this"][label], result["medians_ms"]["other"].get(label)
        print(f"{label}: this {this:.3f} ms, other {other if other is None else round(other, 3)} ms, "
              f"other / this {ratio:.3f} (median of {a.rounds} rounds)", flush=True)
    for tree, n, statuses in result["failed"]:
        print(f"compare_trees: the {tree} tree's round {n} failed: {statuses}", flush=True)
    return 1 if result["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
