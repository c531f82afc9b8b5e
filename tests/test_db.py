"""CandidateDB: queries against an in-memory model, threads, processes, kill -9, and every way opening can fail."""

from __future__ import annotations

import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import cuco.db as dbmod
from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.db import (CandidateDB, DatabaseAccessError, DatabaseError, DiskFullError, DuplicateCandidateError,
                     NotACandidateDatabaseError, SchemaVersionError, UnknownCandidateError)
from cuco.design_space import DesignSpace
from cuco.errors import CucoError

ROOT = Path(__file__).resolve().parents[1]
POINTS = list(DesignSpace().points())[:50]
KILL_ROUNDS = 8  # SIGKILLs per run of the kill test
STATUSES = ("pending", "passed") + tuple(f"failed:{lv}" for lv in LEVELS)
fitnesses = st.one_of(st.none(), st.sampled_from([-1.0, 0.0, 1.0, 2.5]),
                      st.floats(-1e6, 1e6, allow_nan=False))


def make(cid: str, status: str = "passed", fitness: float | None = 1.0, workload: str = "w", island: int = 0,
         parent: str | None = None, generation: int = 0) -> Candidate:
    """A candidate whose results give it `status`."""
    c = Candidate(code=f"// {cid}\n", workload=workload, id=cid, island=island, parent_id=parent,
                  generation=generation, fitness=fitness, created_at=1.7e9 + generation,
                  directives=POINTS[sum(map(ord, cid)) % len(POINTS)])
    for level in LEVELS:
        if status == "pending" and level == "verify":
            break
        failed = status == f"failed:{level}"
        c = c.with_result(LevelResult(level, not failed, "boom" if failed else "", 0.1, {"n": 1}))
        if failed:
            break
    assert c.status == status
    return c


# -- model -----------------------------------------------------------------------------------------
def ranked(model: dict[str, Candidate], workload: str | None = None, island: int | None = None) -> list[Candidate]:
    keep = [c for c in model.values() if c.status == "passed" and c.fitness is not None
            and workload in (None, c.workload) and island in (None, c.island)]
    return sorted(keep, key=lambda c: -c.fitness)  # stable: ties stay in insertion order


def lineage(model: dict[str, Candidate], cid: str) -> list[Candidate]:
    chain, seen, nxt = [], set(), cid
    while nxt is not None and nxt in model and nxt not in seen:
        seen.add(nxt)
        chain.append(model[nxt])
        nxt = model[nxt].parent_id
    return chain[::-1]


def check_against_model(db: CandidateDB, model: dict[str, Candidate], rng_seed: int = 0) -> None:
    assert len(db) == len(model)
    for wl in (None, "a", "b"):
        assert db.all(wl) == [c for c in model.values() if wl in (None, c.workload)]
        top = ranked(model, wl)
        assert db.best(wl) == (top[0] if top else None)
        expected_islands: dict[int, Candidate] = {}
        for c in top:
            expected_islands.setdefault(c.island, c)
        assert db.best_per_island(wl) == dict(sorted(expected_islands.items()))
        for k in (0, 1, 3, 100):
            assert db.top_k(k, wl) == top[:k]
        assert db.top_k(2, wl, island=1) == ranked(model, wl, 1)[:2]
        counts: dict[str, int] = {}
        for c in model.values():
            if wl in (None, c.workload):
                counts[c.status] = counts.get(c.status, 0) + 1
        assert db.count_by_status(wl) == counts
    for island in range(3):
        pool = [c.id for c in model.values() if c.island == island and c.status == "passed"]
        for n in (0, 2, 50):
            got = db.sample(island, n, random.Random(rng_seed))
            assert [c.id for c in got] == random.Random(rng_seed).sample(pool, min(n, len(pool)))
            assert all(c == model[c.id] for c in got)
    for cid in list(model)[:10]:
        assert db.get(cid) == model[cid] and cid in db
        assert db.children_count(cid) == sum(c.parent_id == cid for c in model.values())
        assert db.lineage(cid) == lineage(model, cid)


class DBMachine(RuleBasedStateMachine):
    """Random adds, upserts, meta writes and reopenings agree with a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="cuco-db-")
        self.path = os.path.join(self.dir, "c.db")
        self.db = CandidateDB(self.path)
        self.model: dict[str, Candidate] = {}
        self.meta: dict[str, object] = {}
        self.next = 0

    def draw_candidate(self, data: st.DataObject, cid: str) -> Candidate:
        parents = [None, "ghost"] + list(self.model)
        return make(cid, data.draw(st.sampled_from(STATUSES)), data.draw(fitnesses),
                    data.draw(st.sampled_from(["a", "b"])), data.draw(st.integers(0, 2)),
                    data.draw(st.sampled_from(parents)), self.next)

    @rule(data=st.data())
    def add(self, data: st.DataObject) -> None:
        c = self.draw_candidate(data, f"c{self.next}")
        self.next += 1
        self.db.add(c)
        self.model[c.id] = c

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def add_duplicate(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(sorted(self.model)))
        with pytest.raises(DuplicateCandidateError):
            self.db.add(self.draw_candidate(data, cid))

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def upsert_existing(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(sorted(self.model)))
        c = self.draw_candidate(data, cid)
        self.db.upsert(c)
        self.model[cid] = c  # keeps its position: updates keep the insertion order

    @rule(data=st.data())
    def upsert_new(self, data: st.DataObject) -> None:
        c = self.draw_candidate(data, f"u{self.next}")
        self.next += 1
        self.db.upsert(c)
        self.model[c.id] = c

    @rule(key=st.sampled_from(["workload", "seed", "config"]),
          value=st.one_of(st.integers(), st.text(max_size=10), st.lists(st.booleans(), max_size=3)))
    def meta_set(self, key: str, value: object) -> None:
        self.db.meta_set(key, value)
        self.meta[key] = value

    @rule()
    def reopen(self) -> None:
        self.db.close()
        self.db = CandidateDB(self.path)

    @invariant()
    def agrees(self) -> None:
        check_against_model(self.db, self.model, rng_seed=self.next)
        for key in ("workload", "seed", "config"):
            assert self.db.meta_get(key, "absent") == self.meta.get(key, "absent")

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


TestDBMachine = DBMachine.TestCase
TestDBMachine.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)


# -- hand-checked queries --------------------------------------------------------------------------
def test_queries_on_a_known_tree(tmp_path: Path) -> None:
    root = make("root", fitness=1.0)
    a = make("a", fitness=3.0, parent="root", generation=1)
    b = make("b", "failed:verify", None, island=1, parent="root", generation=1)
    c = make("c", fitness=2.0, island=1, parent="a", generation=2)
    d = make("d", "pending", None, island=1)
    e = make("e", fitness=10.0, workload="other")
    g = make("g", fitness=3.0)  # ties with a; a was stored first
    with CandidateDB(tmp_path / "c.db") as db:
        for x in (root, a, b, c, d, e, g):
            db.add(x)
        assert db.best("w") == a and db.best() == e and db.best("none") is None
        assert db.best_per_island("w") == {0: a, 1: c}
        assert db.top_k(4, "w") == [a, g, c, root] and db.top_k(5, "w", island=1) == [c]
        assert db.children_count("root") == 2 and db.children_count("a") == 1 and db.children_count("zz") == 0
        assert db.lineage("c") == [root, a, c] and db.lineage("root") == [root]
        assert db.count_by_status("w") == {"passed": 4, "failed:verify": 1, "pending": 1}
        assert {x.id for x in db.sample(0, 10, random.Random(1), workload="w")} == {"root", "a", "g"}
        assert db.sample(1, 10, random.Random(1)) == [c]
        assert len(db.sample(0, 2, random.Random(3))) == 2
        assert db.sample(0, 2, random.Random(3)) == db.sample(0, 2, random.Random(3))
        fixed = make("b", fitness=5.0, island=1, parent="root", generation=1)
        db.upsert(fixed)
        assert db.best_per_island("w")[1] == fixed and [x.id for x in db.all()] == list("root a b c d e g".split())
        db.upsert(a.evolve(parent_id="c"))  # a cycle must not hang lineage
        assert [x.id for x in db.lineage("c")] == ["a", "c"]
        db.upsert(c.evolve(parent_id="ghost"))  # an unknown parent ends the chain
        assert db.lineage("c") == [c.evolve(parent_id="ghost")]
        with pytest.raises(UnknownCandidateError) as info:
            db.get("nope")
        assert isinstance(info.value, KeyError) and "nope" in str(info.value)
        with pytest.raises(UnknownCandidateError):
            db.lineage("nope")
        with pytest.raises(DatabaseError):
            db.top_k(-1)
        with pytest.raises(DuplicateCandidateError) as dup:
            db.add(root)
        assert "upsert" in str(dup.value)
    with pytest.raises(DatabaseError, match="closed"):
        len(db)


def test_meta_values(tmp_path: Path) -> None:
    with CandidateDB(tmp_path / "c.db") as db:
        db.meta_set("config", {"islands": 4, "space": {"backends": ["lsa"]}, "ratio": 0.5})
        db.meta_set("seed", 7)
        db.meta_set("seed", 8)
        with pytest.raises(DatabaseError):
            db.meta_set("bad", object())
        db.meta_set("limits", {"best": float("-inf"), "cap": float("inf")})
    with CandidateDB(tmp_path / "c.db") as db:
        assert db.meta_get("config") == {"islands": 4, "space": {"backends": ["lsa"]}, "ratio": 0.5}
        assert db.meta_get("seed") == 8 and db.meta_get("bad") is None and db.meta_get("bad", 1) == 1
        assert db.meta_get("limits") == {"best": float("-inf"), "cap": float("inf")}


# -- threads and processes -------------------------------------------------------------------------
ops = st.tuples(st.sampled_from(["add", "upsert"]), st.integers(0, 6), st.sampled_from(STATUSES), fitnesses,
                st.integers(0, 2))


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(ops, max_size=12), min_size=2, max_size=4))
def test_threads_agree_with_model(plans: list[list[tuple]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "c.db")
        shared = CandidateDB(path)
        models: list[dict[str, Candidate]] = [{} for _ in plans]
        errors: list[BaseException] = []
        done = threading.Event()

        def writer(t: int) -> None:
            db = shared if t % 2 == 0 else CandidateDB(path)  # one shared object, and separate connections
            try:
                for op, n, status, fitness, island in plans[t]:
                    c = make(f"t{t}-{n}", status, fitness, workload="ab"[n % 2], island=island)
                    if op == "add" and c.id in models[t]:
                        with pytest.raises(DuplicateCandidateError):
                            db.add(c)
                        continue
                    db.add(c) if op == "add" else db.upsert(c)
                    models[t][c.id] = c
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)
            finally:
                if db is not shared:
                    db.close()

        def reader() -> None:
            try:
                while not done.is_set():
                    for c in shared.all():
                        assert c.id.startswith("t") and c.status in STATUSES
                    shared.best()
                    shared.count_by_status()
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(len(plans))]
        rd = threading.Thread(target=reader)
        rd.start()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        done.set()
        rd.join()
        assert not errors, errors
        merged = {cid: c for m in models for cid, c in m.items()}
        stored = shared.all()
        assert {c.id: c for c in stored} == merged
        for m in models:  # each thread's candidates appear in the order that thread stored them
            assert [c.id for c in stored if c.id in m] == list(m)
        order = {c.id: i for i, c in enumerate(stored)}
        check_against_model(shared, {cid: merged[cid] for cid in sorted(merged, key=order.get)})
        assert shared.integrity_check() == "ok"
        shared.close()


def _process_writer(path: str, worker: int, count: int, start: "multiprocessing.synchronize.Event") -> None:
    start.wait()
    with CandidateDB(path) as db:
        for i in range(count):
            db.add(make(f"p{worker}-{i}", fitness=float(i), island=worker))
            if i % 3 == 0:
                db.upsert(make(f"p{worker}-{i}", "failed:bench", None, island=worker))
            db.meta_set(f"worker{worker}", i)


def test_processes_all_land(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    path, workers, count = str(tmp_path / "c.db"), 4, 40
    start = ctx.Event()
    procs = [ctx.Process(target=_process_writer, args=(path, w, count, start)) for w in range(workers)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with CandidateDB(path) as db:
        assert len(db) == workers * count and db.integrity_check() == "ok"
        for w in range(workers):
            assert db.meta_get(f"worker{w}") == count - 1
            for i in range(count):
                assert db.get(f"p{w}-{i}").status == ("failed:bench" if i % 3 == 0 else "passed")
        best = db.best_per_island()
        assert sorted(best) == list(range(workers))
        assert all(best[w].fitness == max(i for i in range(count) if i % 3) for w in range(workers))


def _use_inherited(db: CandidateDB) -> None:
    for i in range(20):
        db.add(make(f"fork-{i}"))


def test_forked_child_opens_its_own_connection(tmp_path: Path) -> None:
    with CandidateDB(tmp_path / "c.db") as db:
        db.add(make("parent-0"))
        p = multiprocessing.get_context("fork").Process(target=_use_inherited, args=(db,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        db.add(make("parent-1"))
        assert len(db) == 22 and db.integrity_check() == "ok"


# -- kill -9 ---------------------------------------------------------------------------------------
def test_sigkill_leaves_committed_candidates(tmp_path: Path) -> None:
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    path = tmp_path / "c.db"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    added: set[str] = set()
    passed: dict[str, float] = {}
    for rnd in range(KILL_ROUNDS):
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "db_writer_child.py"), str(path), f"r{rnd}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout))  # type: ignore[arg-type]
        reader.start()
        # Round 0 may die while creating the file; later rounds are killed mid-write.
        deadline = time.monotonic() + 30
        while rnd and "open\n" not in lines and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.35 if rnd else 0.6))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join()
        stderr = proc.stderr.read()  # type: ignore[union-attr]
        assert proc.returncode == -signal.SIGKILL, stderr
        for line in lines:
            if not line.endswith("\n"):
                continue  # cut by the kill
            word, *rest = line.split()
            if word == "added":
                added.add(rest[0])
            elif word == "passed":
                passed[rest[0]] = float(rest[1])
        if not path.exists():
            continue
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok", f"seed {seed} round {rnd}"
        raw.close()
        with CandidateDB(path) as db:
            assert db.integrity_check() == "ok"
            stored = {c.id: c for c in db.all()}
            missing = (added | set(passed)) - set(stored)
            assert not missing, f"seed {seed} round {rnd}: committed candidates lost: {sorted(missing)[:5]}"
            for cid, fitness in passed.items():
                assert stored[cid].status == "passed" and stored[cid].fitness == fitness
            for c in stored.values():  # only whole transactions: pending without results, or passed
                assert (c.status, c.fitness, c.last_level) in (("pending", None, None),
                                                                ("passed", c.fitness, "bench")), c.id
            assert len(stored) <= len(added | set(passed)) + rnd + 1  # at most one unreported add per round
    assert len(added) > 20, f"seed {seed}: the child wrote too little for the test to mean anything"


# -- opening failures ------------------------------------------------------------------------------
def test_newer_schema_rejected_untouched(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with CandidateDB(path) as db:
        db.add(make("x"))
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {dbmod.SCHEMA_VERSION + 1}")
    raw.close()
    before = path.read_bytes()
    with pytest.raises(SchemaVersionError) as info:
        CandidateDB(path)
    msg = str(info.value)
    assert str(dbmod.SCHEMA_VERSION + 1) in msg and str(dbmod.SCHEMA_VERSION) in msg and "upgrade cuco" in msg
    assert isinstance(info.value, CucoError)
    assert path.read_bytes() == before


def test_older_schema_migrated_or_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.db"
    with CandidateDB(path) as db:
        db.add(make("x"))
    v = dbmod.SCHEMA_VERSION
    # Mocked future: version v+2 with no migration from v+1 -> rejected, and the first step rolled back.
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", v + 2)
    monkeypatch.setattr(dbmod, "MIGRATIONS", {v: ("ALTER TABLE candidates ADD COLUMN note TEXT",)})
    with pytest.raises(SchemaVersionError, match="cannot migrate"):
        CandidateDB(path)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == v
    assert "note" not in [r[1] for r in raw.execute("PRAGMA table_info(candidates)")]
    raw.close()
    # Mocked future: version v+1 with a migration -> applied, data kept.
    monkeypatch.setattr(dbmod, "SCHEMA_VERSION", v + 1)
    with CandidateDB(path) as db:
        assert db.get("x") == make("x")
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == v + 1
    assert "note" in [r[1] for r in raw.execute("PRAGMA table_info(candidates)")]
    raw.close()


@pytest.mark.parametrize("content", [b"", b"hello", b"not a database at all\n" * 200, os.urandom(8192)])
def test_garbage_file_rejected_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.db"
    path.write_bytes(content)
    if not content:  # an empty file is an empty SQLite database: it becomes a candidate database
        with CandidateDB(path) as db:
            assert len(db) == 0
        return
    with pytest.raises(NotACandidateDatabaseError) as info:
        CandidateDB(path)
    assert str(path) in str(info.value) and "not" in str(info.value)
    assert path.read_bytes() == content


def test_foreign_sqlite_database_rejected(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    raw = sqlite3.connect(path)
    raw.execute("CREATE TABLE songs (title TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(NotACandidateDatabaseError, match="another program"):
        CandidateDB(path)


def test_directory_path_rejected(tmp_path: Path) -> None:
    with pytest.raises(DatabaseAccessError, match="directory"):
        CandidateDB(tmp_path)
    with CandidateDB(tmp_path / "new" / "nested" / "c.db") as db:  # missing directories are created
        assert len(db) == 0


_OPEN_SCRIPT = """
import os, sys
from cuco.db import CandidateDB, DatabaseError
uid, gid = int(sys.argv[2]), int(sys.argv[3])
if uid >= 0:  # drop root for good once the interpreter and cuco are loaded
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
try:
    CandidateDB(sys.argv[1])
except DatabaseError as exc:
    print(type(exc).__name__, exc)
else:
    print("opened")
"""


def test_read_only_location_rejected(as_user: list[str]) -> None:
    """Runs the opener unprivileged (as nobody when we are root, since root ignores permission bits)."""
    base = Path(tempfile.mkdtemp(prefix="cuco-ro-", dir="/tmp"))
    try:
        base.chmod(0o755)
        existing = base / "existing"
        existing.mkdir()
        with CandidateDB(existing / "c.db") as db:
            db.add(make("x"))
        empty = base / "empty"
        empty.mkdir()
        writable_file = base / "writable_file"
        writable_file.mkdir()
        with CandidateDB(writable_file / "c.db"):
            pass
        (writable_file / "c.db").chmod(0o666)
        (existing / "c.db").chmod(0o444)
        for d in (existing, empty, writable_file):
            d.chmod(0o555)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        for target in (empty / "c.db", empty / "sub" / "c.db", existing / "c.db", writable_file / "c.db"):
            out = subprocess.run([sys.executable, "-c", _OPEN_SCRIPT, str(target), *as_user], capture_output=True,
                                 text=True, env=env, timeout=60, cwd="/")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("DatabaseAccessError"), (target, out.stdout)
            assert str(target.parent) in out.stdout and "writable" in out.stdout
        with CandidateDB(existing / "c.db") as db:  # the refused attempts left the database intact
            assert db.get("x") == make("x") and db.integrity_check() == "ok"
    finally:
        for d in base.iterdir():
            d.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_disk_full_leaves_nothing_half_written(tmp_path: Path) -> None:
    """SQLITE_FULL for real: SQLite's page limit is the same error path as a full disk."""
    path = tmp_path / "c.db"
    db = CandidateDB(path)
    db.add(make("small"))
    conn = db._conn  # the limit is per connection; no public knob is worth having for this
    assert conn is not None
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")
    big = make("big").evolve(code="x" * 200_000)
    with pytest.raises(DiskFullError) as info:
        db.add(big)
    assert "disk full" in str(info.value) and "free space" in str(info.value)
    with pytest.raises(DiskFullError):
        db.upsert(make("small").evolve(code="y" * 200_000))
    assert len(db) == 1 and db.get("small") == make("small") and db.integrity_check() == "ok"
    db.close()
    with CandidateDB(path) as db:  # space again: the same write goes through
        db.add(big)
        assert db.get("big") == big and len(db) == 2


def test_unstorable_values(tmp_path: Path) -> None:
    with CandidateDB(tmp_path / "c.db") as db:
        odd = make("odd").with_result(LevelResult("bench", True, data={"handle": object()}))
        with pytest.raises(DatabaseError, match="JSON"):
            db.add(odd)
        assert len(db) == 0
        nan = make("nan", fitness=float("nan"))  # kept, but never ranked
        db.add(nan)
        db.add(make("one", fitness=1.0))
        assert db.best().id == "one" and [c.id for c in db.top_k(5)] == ["one"]
        assert db.get("nan").fitness != db.get("nan").fitness


def test_a_read_only_handle_reads_and_never_writes(tmp_path):
    path = tmp_path / "c.db"
    with CandidateDB(path) as db:
        db.add(make("a"))
        with CandidateDB(path, readonly=True) as ro:  # beside an open writer
            assert [c.id for c in ro.all()] == ["a"] and ro.best().id == "a"
            with pytest.raises(DatabaseAccessError, match="opened read-only"):
                ro.add(make("b"))
    with pytest.raises(DatabaseError, match="does not exist"):
        CandidateDB(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()
