"""A results file's rows kept across calls: a shape measured again replaces its row, every other shape stays (a W = 2
file can be filled by several device calls); torch anchors' rows merged in by shape; the machine's peer-to-peer
figures taken from a measurement made with nothing else running when one is named (CUCO_P2P_JSON)."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
from typing import Any, Callable


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def open_meta(path: Path, world: int) -> dict[str, Any]:
    """The results file at `path` if it holds rows of this world size, else a new one. Rows measured before
    CUCO_RESULTS_SINCE (an ISO date-time, e.g. the start of this machine's lease) are dropped, so one file never
    mixes machines; `dropped_rows` names them."""
    if path.exists():
        meta = json.loads(path.read_text())
        if meta.get("world") == world:
            meta.setdefault("rows", [])
            meta.setdefault("errors", [])
            since = os.environ.get("CUCO_RESULTS_SINCE", "")
            if since:
                old = [r for r in meta["rows"] if str(r.get("date") or "")[:19] < since[:19]]
                meta["rows"] = [r for r in meta["rows"] if r not in old]
                meta["errors"] = [e for e in meta["errors"] if str(e.get("date") or "")[:19] >= since[:19]]
                meta["dropped_rows"] = [{"shape": r.get("shape"), "device": r.get("device"), "date": r.get("date")}
                                        for r in old]
            return meta
    return {"world": world, "rows": [], "errors": []}


#: The lists of rows a results file may hold: the goal's rows and, apart, short prompts' (KV transfer).
TABLES = ("rows", "small_rows")


def newest_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The most recently measured row that names its device ({} if none): what a file's title names, since rows of
    other shapes kept from earlier device calls may come from another machine."""
    return max((r for r in rows if r.get("device")), key=lambda r: str(r.get("date") or ""), default={})


def put_row(meta: dict[str, Any], row: dict[str, Any], key: str = "shape", table: str = "rows") -> None:
    """`row` replaces the row of the same shape in `table` (in place), or is appended; that shape's old errors go."""
    meta[table] = [r for r in meta.get(table, []) if r.get(key) != row.get(key)] + [row]
    meta["errors"] = [e for e in meta.get("errors", []) if e.get("shape") != row.get(key)]
    meta["date"] = now()


def put_error(meta: dict[str, Any], shape: str, error: str, trace: str = "") -> None:
    meta["errors"] = [e for e in meta.get("errors", []) if e.get("shape") != shape]
    meta["errors"].append({"shape": shape, "error": error, "trace": trace[-2000:], "date": now()})


def save_meta(path: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """Write `meta` to `path` atomically, under a lock, keeping what another process wrote there since `meta` was
    read (two lanes of one device call may fill the same file; each read it at its start): per table and shape the
    row with the later `date` stays, and errors of shapes `meta` does not mention are kept. Returns what was written,
    for the tables rendered from it."""
    import fcntl
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from cuco.atomic import write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(f".{path.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = dict(meta)
        disk = json.loads(path.read_text()) if path.exists() else {}
        if disk.get("world") == meta.get("world"):
            since = os.environ.get("CUCO_RESULTS_SINCE", "")[:19]  # as open_meta: older rows stay dropped
            mentioned = set()
            for table in TABLES:
                rows = {r.get("shape"): r for r in meta.get(table, [])}
                mentioned |= set(rows)
                for r in disk.get(table, []):
                    mine = rows.get(r.get("shape"))
                    if since and str(r.get("date") or "")[:19] < since:
                        continue
                    if mine is None or str(r.get("date") or "")[:19] > str(mine.get("date") or "")[:19]:
                        rows[r.get("shape")] = r
                if rows:
                    merged[table] = list(rows.values())
            mentioned |= {e.get("shape") for e in meta.get("errors", [])}
            merged["errors"] = [*meta.get("errors", []),
                                *(e for e in disk.get("errors", []) if e.get("shape") not in mentioned)]
        write_text(path, json.dumps(merged, indent=2, default=str) + "\n")
    return merged


def torch_rows(path: str | None, key: Callable[[dict[str, Any]], Any] = lambda r: r.get("shape")
               ) -> dict[Any, dict[str, Any]]:
    """The rows of a torch anchor's output (benchmarks/torch_*.py) by shape, each with the anchor's device and
    versions; {} when no file is named. A named file that is missing is an error (the anchor did not run)."""
    if not path:
        return {}
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"torch anchor results {path} not found: run the anchor first (benchmarks/gpu_w.sh)")
    data = json.loads(p.read_text())
    env = {"torch_device": data.get("device"), "torch": data.get("torch"), "torch_nccl": data.get("nccl")}
    return {key(r): {**r, **env} for r in data.get("rows", [])}


def merge_torch(row: dict[str, Any], anchor: dict[str, Any] | None, field: str) -> None:
    """Copy the anchor's `field` (and its error, device, versions) into `row`; `faster_than_torch` where both
    times exist."""
    if not anchor:
        return
    keep = {k: v for k, v in anchor.items() if k.startswith(field.rsplit("_ms", 1)[0]) or k in
            ("torch_device", "torch", "torch_nccl", "error")}
    if "error" in keep:
        keep["torch_error"] = keep.pop("error")
    row.update(keep)
    if row.get("best_ms") and row.get(field):
        row["faster_than_torch"] = row["best_ms"] < row[field]


def machine_or_measured(world: int, measure: Callable[[int], dict[str, Any]]) -> dict[str, Any]:
    """The machine record of a W >= 2 file: CUCO_P2P_JSON's (topology and p2p measured alone, at the start of the
    device session) when set, else measured now."""
    src = os.environ.get("CUCO_P2P_JSON")
    if world >= 2 and src and Path(src).exists():
        data = json.loads(Path(src).read_text())  # record.machine()'s output for every GPU of the host
        if (data.get("p2p") or {}).get("gpus", 0) >= world:
            return {**data, "measured_alone": True, "source": os.path.basename(src)}
    return measure(world)


def pending(path: Path, world: int, names: list[str], anchor_field: str = "") -> list[str]:
    """The names among `names` that a results file still needs: no row of this world size, a row not verified, a
    fast path that did not pass, a row without its torch anchor's `anchor_field` (when named), or a row marked
    `superseded` (measured under an older reading of its shape). Rows of `small_rows` (short prompts) count too."""
    rows = {}
    if path.exists():
        meta = json.loads(path.read_text())
        if meta.get("world") == world:
            rows = {r.get("shape"): r for t in TABLES for r in meta.get(t, [])}

    def done(row: dict[str, Any] | None) -> bool:
        return bool(row) and row.get("verified") is True and row.get("fastpath_status", "passed") == "passed" \
            and not row.get("superseded") and (not anchor_field or row.get(anchor_field) is not None)

    return [n for n in names if not done(rows.get(n))]


def merge_rows(meta: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Fold the rows of `other` (the same workload and world, measured by another device call) into `meta`: a shape
    `meta` lacks is added; a shape both hold keeps the row with the smaller spread (the steadier measurement, never
    the faster one) and lists the other under `other_measurements`. Returns the shapes whose row came from `other`."""
    if other.get("world") != meta.get("world"):
        raise ValueError(f"cannot merge rows of world {other.get('world')} into a file of world {meta.get('world')}")
    taken = []
    for table, row in [(t, r) for t in TABLES for r in other.get(t, [])]:
        mine = next((r for r in meta.get(table, []) if r.get("shape") == row.get("shape")), None)
        if mine is not None and row.get("date") is not None and row.get("date") in [mine.get("date"),
                                                    *(m.get("date") for m in mine.get("other_measurements", []))]:
            continue  # a measurement this file already holds
        if mine is not None:
            spread = (lambda r: r.get("spread") if isinstance(r.get("spread"), (int, float)) else float("inf"))
            keep, drop = (row, mine) if spread(row) < spread(mine) else (mine, row)
            summary = {k: drop.get(k) for k in ("date", "device", "best_ms", "host_ms", "speedup", "spread",
                                                "best_point", "verified")}
            keep["other_measurements"] = [*keep.get("other_measurements", []), *drop.get("other_measurements", []),
                                          summary]
            row = keep
        if row is not mine:
            put_row(meta, row, table=table)
            taken.append(str(row.get("shape")))
    return taken


if __name__ == "__main__":  # results_rows.py pending FILE W a,b,c [FIELD] | merge BASE OTHER... | fold BASE OTHER...
    import sys

    if len(sys.argv) >= 4 and sys.argv[1] in ("merge", "fold"):  # rows of OTHER... into BASE, in place
        # merge: the steadier row of a shape stays (results files); fold: the newer row replaces (anchors' files)
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
        from cuco.atomic import write_text

        base = Path(sys.argv[2])
        meta = json.loads(base.read_text()) if base.exists() else {"world": None, "rows": []}
        for other in sys.argv[3:]:
            data = json.loads(Path(other).read_text())
            if sys.argv[1] == "merge":
                print(other, "->", base, ":", merge_rows(meta, data))
            else:
                meta = {**meta, **{k: v for k, v in data.items() if k != "rows"}, "rows": meta.get("rows", [])}
                for row in data.get("rows", []):
                    put_row(meta, row)
        write_text(base, json.dumps(meta, indent=2, default=str) + "\n")
        sys.exit(0)
    if len(sys.argv) not in (5, 6) or sys.argv[1] != "pending":
        sys.exit("usage: results_rows.py pending FILE W NAMES [ANCHOR_FIELD] (names separated by ',' or ';')")
    sep = ";" if ";" in sys.argv[4] else ","
    names = [n for n in sys.argv[4].split(sep) if n]
    print(sep.join(pending(Path(sys.argv[2]), int(sys.argv[3]), names, *sys.argv[5:])))
