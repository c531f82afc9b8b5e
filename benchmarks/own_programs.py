"""`cuco run prog.cu` on programs of the fast-path corpus (tests/fixtures/host_programs), offline (no LLM): per
program the fast path's candidate and an offline directive search, verified and timed by the program harness
against the program itself. Writes one JSON row per program; `--render` turns row files into the markdown table.

    PYTHONPATH=src python3 benchmarks/own_programs.py --programs rs_grad_shard,sp_mlp_ag_rs --evals 6 \
        --world 1 --runs-dir /tmp/own --out rows.json
    python3 benchmarks/own_programs.py --render rows1.json rows2.json --md benchmarks/results/own_programs_w1.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import record_lock, source_commit  # noqa: E402  (sibling scripts)
from search_rows import SEARCH_BATCH, history  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "host_programs"


def run_one(name: str, world: int, evals: int, runs_dir: Path) -> dict[str, Any]:
    from cuco.run import RunOptions, run_workload

    path = CORPUS / f"{name}.cu"
    manifest = json.loads((CORPUS / "manifest.json").read_text())["programs"].get(name, {})
    t0 = time.time()
    row: dict[str, Any] = {"program": name, "collectives": manifest.get("collectives", []),
                           "launch_model": manifest.get("launch_model", "?"), "world": world}
    try:
        # each of the run's messages in the log as it comes, with the seconds since the program started: a program
        # that does not end within its part still says where its time went
        def said(message: str) -> None:
            print(f"  {name} +{time.time() - t0:.0f}s: {message}", flush=True)

        # progress: a plain line per evaluated candidate (the log is a pipe), so a search that does not end in its
        # part still shows how far it got (tp_mlp_cublas's log went silent for 280 s after its fast path)
        # confirm=False: the row's figures of record re-time the winner below, under the record lock
        s = run_workload(RunOptions(workload=str(path), world=world, evaluations=evals, batch_size=SEARCH_BATCH,
                                    run_dir=str(runs_dir / name), progress=True, confirm=False), on_event=said)
    except Exception as exc:  # a row says why, the next program still runs
        row.update(error=f"{type(exc).__name__}: {exc}", seconds=round(time.time() - t0, 1))
        return row
    from cuco.events_log import FILE, stage_seconds

    evaluations = history(s.run_dir, s.workload)
    fast = s.fastpath
    events = Path(s.run_dir) / FILE
    if events.is_file():  # where the program's minutes went: compile, verify, bench, and outside any candidate
        row["stage_seconds"] = stage_seconds(events)
    row.update(evaluated=s.evaluated, counts=s.counts, evaluation=s.evaluation, llm_calls=0,
               points=sorted({e["point"] for e in evaluations if e["labelled"]}),
               fastpath_status=fast.status if fast else None,
               fastpath_ms=fast.metrics.get("time_ms") if fast else None, seconds=round(time.time() - t0, 1),
               evaluations_in_order=evaluations)
    if s.best is not None:
        m, data = s.best.metrics, s.best.results["bench"].data
        row.update(verified=True, best_point=s.best.directives.label() if s.best.directives else s.best.mutation,
                   host_ms=m.get("host_ms"), best_ms=m.get("time_ms"), speedup=m.get("speedup"),
                   cold_ms=m.get("cold_ms"), cold_best_ms=m.get("cold_time_ms"),
                   spread=m.get("spread"), verify_how=s.best.results["verify"].data.get("how"),
                   device=data.get("device"), nccl=data.get("nccl_version"), cuda=data.get("cuda_version"),
                   date=data.get("date"), runs=data.get("runs"), host_runs_ms=data.get("host_runs_ms"),
                   best_runs_ms=data.get("runs_ms"), commit=source_commit())
        record(row, s, path, world)
    else:
        row.update(verified=False)
    return row


def record(row: dict[str, Any], s: Any, path: Path, world: int) -> None:
    """The row's figures of record (docs/measuring.md): the rewrite the search found fastest re-timed against the
    program in interleaved rounds until the spread is within 0.03 (cuco.program.retime); the search's own
    figures stay as `search_*`. Never slower: the best point is the rewrite only where these rounds show it
    faster (Retimed.faster: a median speedup above 1, with the spread within its limit or a sign test over the
    paired rounds), else the program itself (speedup exactly 1.0)."""
    from cuco.db import CandidateDB
    from cuco.program.evaluator import ProgramEvaluator
    from cuco.program.workload import ProgramWorkload
    from cuco.rundir import DB_FILE

    best = s.best
    row.update(search_best_point=row["best_point"], search_host_ms=row["host_ms"], search_best_ms=row["best_ms"],
               search_speedup=row["speedup"])
    rewrite_id = best.results["bench"].data.get("fastest_rewrite") if best.mutation == "original" else best.id
    if rewrite_id is None:
        return
    db = CandidateDB(Path(s.run_dir) / DB_FILE, readonly=True)
    try:
        rewrite = db.get(rewrite_id)
    finally:
        db.close()
    ev = ProgramEvaluator(ProgramWorkload.load(path).program, world=world)
    try:
        ev.compile_original()
        with record_lock() as waited_s:   # two lanes' figures of record never overlap (as the workloads' do not)
            got = ev.retime(rewrite.code)
    except Exception as exc:  # the search's figures stand, and the row says why they were not re-timed
        row["record_error"] = f"{type(exc).__name__}: {exc}"
        return
    finally:
        ev.close()
    row.update(got.to_dict(), record_point=rewrite.directives.label() if rewrite.directives else rewrite.mutation,
               record_lock_wait_s=round(waited_s, 1))
    faster = got.faster
    row.update(best_point=row["record_point"] if faster else "original", host_ms=got.host_ms,
               best_ms=got.best_ms if faster else got.host_ms, speedup=got.speedup if faster else 1.0,
               cold_ms=row["record_cold_ms"], cold_best_ms=row["record_cold_best_ms"] if faster else
               row["record_cold_ms"], spread=got.spread, runs=len(got.rounds))


def render(rows: list[dict[str, Any]]) -> str:
    dev = next((r.get("device") for r in rows if r.get("device")), "?")
    date = next((r.get("date") for r in rows if r.get("date")), datetime.date.today().isoformat())
    nccl = next((r.get("nccl") for r in rows if r.get("nccl")), "?")
    cuda = next((r.get("cuda") for r in rows if r.get("cuda")), "?")
    out = [f"# `cuco run prog.cu` on the fast-path corpus, W = {rows[0].get('world', 1) if rows else 1}", "",
           f"Device {dev}; NCCL {nccl}; CUDA {cuda}; {date}. Offline search (directive mutator), LLM calls = 0.",
           "Times are the program harness's (csrc/include/cuco/program/observe.h): host wall time between device "
           "synchronisations around the region from the first kernel feeding a collective to the last consuming "
           "one, repeated in each process: median of the warm instances per run, median over runs (cold = the "
           "first instance); the host program is timed in the same rounds, and is the best point (`original`, "
           "speedup 1) when no rewrite beats it. Verified = "
           "the candidate's read-backs equal the original program's under delayed arrival and in every timed run.",
           "Rows with `repeats` hold figures of record: the search's fastest rewrite re-timed against the program "
           "in interleaved rounds of fresh processes (at least 3, until the spread is within 0.03 or, after 6, "
           "every round agrees on the faster side, at most 9; "
           "cuco.program.retime), its read-backs checked each round; the best point is the rewrite only where "
           "those rounds show it faster: a median speedup above 1 with the spread within 0.03 or, where it is not, "
           "the rewrite faster in enough paired rounds (one-sided sign test, p <= 0.05; `faster rounds`). "
           "Rows without hold the search's own timed rounds.",
           "", "| program | collectives | launch model | evaluated | fast path ms | best point | host ms | best ms "
           "| speedup | host cold ms | best cold ms | repeats | spread | faster rounds | verified | LLM calls |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['program']} | {', '.join(r['collectives'])} | {r['launch_model']} | - | - | "
                       f"error: {r['error'][:120]} | - | - | - | - | - | - | - | - | no | 0 |")
            continue

        def f(x: Any) -> str:
            return f"{x:.4f}" if isinstance(x, (int, float)) else "-"

        out.append(f"| {r['program']} | {', '.join(r['collectives'])} | {r['launch_model']} | {r['evaluated']} | "
                   f"{f(r.get('fastpath_ms'))} | `{r.get('best_point', '-')}` | {f(r.get('host_ms'))} | "
                   f"{f(r.get('best_ms'))} | {f(r.get('speedup'))} | {f(r.get('cold_ms'))} | "
                   f"{f(r.get('cold_best_ms'))} | {r.get('record_repeats', '-')} | {f(r.get('spread'))} | "
                   f"{faster_rounds(r)} | "
                   f"{'yes' if r.get('verified') else 'no'} | "
                   f"{r.get('llm_calls', 0)} |")
    return "\n".join(out) + "\n"


def faster_rounds(row: dict[str, Any]) -> str:
    """`k/n (p = …)`: the re-timed rounds in which the rewrite was faster, and the sign test's p; `-` without."""
    if "record_host_runs_ms" not in row:
        return "-"
    from cuco.program.retime import Retimed, Round, sign_p

    got = Retimed(tuple(Round(h, 0.0, b, 0.0) for h, b in zip(row["record_host_runs_ms"], row["record_best_runs_ms"])))
    return f"{got.rounds_faster}/{len(got.rounds)} (p = {sign_p(got.rounds_faster, len(got.rounds)):.3f})"


def _rows(data: Any) -> list[dict[str, Any]]:
    """The rows of a row file (a list) or of a results file ({"rows": [...]})."""
    return data["rows"] if isinstance(data, dict) else data


def programs(names: str, done: str | None, shard: str = "0/1") -> list[str]:
    """The programs to run: `names` (comma-separated, or 'pending': the whole corpus in manifest order), less those
    with a row in the results file `done`; shard 'i/n': every n-th of them from the i-th (lanes on disjoint GPUs
    share one list without running a program twice)."""
    try:
        i, n = (int(x) for x in shard.split("/"))
        assert 0 <= i < n
    except (ValueError, AssertionError):
        raise SystemExit(f"--shard {shard!r}: write i/n with 0 <= i < n, e.g. 0/2 and 1/2 for two lanes") from None
    corpus = list(json.loads((CORPUS / "manifest.json").read_text())["programs"])
    wanted = corpus if names == "pending" else [n for n in names.split(",") if n]
    unknown = [n for n in wanted if n not in corpus]
    if unknown:
        raise SystemExit(f"not in the corpus: {', '.join(unknown)} (names: {', '.join(corpus)})")
    measured = set()
    if done and Path(done).is_file():
        data = json.loads(Path(done).read_text())
        measured = {r["program"] for r in _rows(data) if "error" not in r}
    return [n for n in wanted if n not in measured][i::n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--programs", default="", help="comma-separated corpus names; 'pending' (with --done): every "
                    "corpus program without a row in the --done results file")
    ap.add_argument("--done", default=None, help="a results file (own_programs_w<W>.json) whose programs are skipped")
    ap.add_argument("--shard", default="0/1", help="i/n: every n-th program of the list from the i-th (one per lane)")
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--evals", type=int, default=6)
    ap.add_argument("--runs-dir", default="/tmp/cuco-own-programs")
    ap.add_argument("--out", default="own_programs_rows.json")
    ap.add_argument("--render", nargs="*", default=None, help="row files to turn into markdown")
    ap.add_argument("--md", default="own_programs.md")
    args = ap.parse_args()
    if args.render is not None:
        rows = [r for f in args.render for r in _rows(json.loads(Path(f).read_text()))]
        Path(args.md).write_text(render(rows))
        print(render(rows))
        return 0
    rows = []
    for name in programs(args.programs, args.done, args.shard):
        row = run_one(name, args.world, args.evals, Path(args.runs_dir))
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("runs_ms")}), flush=True)
        rows.append(row)
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
