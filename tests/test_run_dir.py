"""A run directory has one writer (a lock that dies with its holder), a manifest that a resume must agree
with, and a clear error for a GPU count that cannot serve the world size; readers are never blocked."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import attrs
import pytest

from cuco import runlock, workloads
from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.cli import main
from cuco.db import CandidateDB
from cuco.errors import CucoError
from cuco.evaluate.executor import Executor
from cuco.manifest import RunManifest
from cuco.run_checks import check_gpus, make_manifest

ROOT = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"),
                                                    os.environ.get("PYTHONPATH", "")]))


# -- the lock -------------------------------------------------------------------------------------------------
HOLDER = textwrap.dedent("""
    import sys, time
    from cuco import runlock
    runlock.acquire(sys.argv[1])
    print("held", flush=True)
    time.sleep(300)
""")


def test_a_second_writer_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_stale_lock(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=ENV, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(runlock.RunLockedError, match=f"being written by process {holder.pid}"):
            runlock.acquire(tmp_path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with runlock.held(tmp_path), runlock.held(tmp_path):  # free again, and re-entrant in one process
        assert (tmp_path / runlock.LOCK_FILE).read_text().strip() == str(os.getpid())


def test_a_search_while_another_process_holds_the_lock_is_refused_before_it_reads_or_writes(tmp_path):
    """start, resume and run take the lock first: they never read a run another process is still writing."""
    from test_search_workload import SHAPE, TOPOLOGY, make_workload
    from cuco.evaluate.modelled import ModelledEvaluator
    from cuco.search import api

    w = make_workload()
    ev = ModelledEvaluator(w, SHAPE, 2)
    (tmp_path / api.DB_FILE).write_bytes(b"")  # what a writer's first instant leaves: an empty database file
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], env=ENV, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for call in (lambda: api.run(tmp_path, w, ev, 4, space=w.space(TOPOLOGY)),
                     lambda: api.start(tmp_path, w, ev, space=w.space(TOPOLOGY)),
                     lambda: api.resume(tmp_path, w, ev)):
            with pytest.raises(runlock.RunLockedError, match=f"being written by process {holder.pid}"):
                call()
        assert (tmp_path / api.DB_FILE).stat().st_size == 0  # nothing written by the refused calls
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


SEARCH = textwrap.dedent("""
    import sys
    from doubles import SlowEvaluator
    from test_search_workload import SHAPE, TOPOLOGY, make_workload
    from cuco.evaluate.modelled import ModelledEvaluator
    from cuco.search import api

    w = make_workload()
    api.run(sys.argv[1], w, SlowEvaluator(ModelledEvaluator(w, SHAPE, 2), pause=0.15), 24, space=w.space(TOPOLOGY),
            seed=3, islands=2, batch_size=2)
""")


def test_two_processes_on_one_run_dir_one_writes_the_other_is_refused_readers_read(tmp_path):
    run_dir = tmp_path / "run"
    procs = [subprocess.Popen([sys.executable, "-c", SEARCH, str(run_dir)], env=ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    reads = 0
    while any(p.poll() is None for p in procs):  # a reader during the run: never blocked, always consistent
        if (run_dir / "candidates.db").exists():
            try:
                with CandidateDB(run_dir / "candidates.db", readonly=True) as db:
                    assert len(db) <= 24
                    reads += 1
            except CucoError as exc:
                assert "no such table" in str(exc)  # the writer is creating the tables right now
        time.sleep(0.2)
    outs = [p.communicate() for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes[0] == 0 and codes[1] != 0, outs
    loser = next(err for p, (_out, err) in zip(procs, outs) if p.returncode != 0)
    winner = next(p.pid for p in procs if p.returncode == 0)
    assert f"RunLockedError: {run_dir} is being written by process {winner}" in loser
    assert reads > 0
    with CandidateDB(run_dir / "candidates.db", readonly=True) as db:
        assert len(db) == 24 and db.count_by_status().get("pending", 0) == 0


# -- the manifest ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stored() -> RunManifest:
    """The manifest a run of gemm_allgather at world 2 on this machine starts with."""
    from cuco.evaluate.cascade import Evaluator

    wl = workloads.get("gemm_allgather")
    return make_manifest(wl, Evaluator(wl, world=2), seed=0, evaluations=12)


def _run_dir_with(tmp_path: Path, manifest: RunManifest, evaluated: int = 0) -> Path:
    manifest.write(tmp_path)
    with CandidateDB(tmp_path / "candidates.db") as db:
        for _ in range(evaluated):
            c = Candidate(code="x", workload=manifest.workload, mutation="seed")
            for level in LEVELS:
                c = c.with_result(LevelResult(level, True))
            db.add(c)
    return tmp_path


def _files(d: Path) -> dict[str, bytes]:
    """The run's files (SQLite's -wal/-shm, which any reader may create, aside)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if not p.name.endswith(("-wal", "-shm"))}


@pytest.mark.parametrize("args, says", [
    (["--world", "1"], "--world 1 but the run was started with --world 2; drop --world or start a new --run-dir"),
    (["--seed", "5"], "--seed 5 but the run was started with --seed 0; drop --seed"),
    (["--shape", "4096,4096,4096"], "--shape 4096x4096x4096 but the run was started with --shape "),
])
def test_resume_with_another_problem_is_refused_naming_the_difference(args, says, stored, tmp_path, capsys):
    run_dir = _run_dir_with(tmp_path, stored)
    before = _files(run_dir)
    code = main(["run", "gemm_allgather", "--quiet", "--resume", "--run-dir", str(run_dir), *args])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert _files(run_dir) == before  # nothing written, not even the lock file


@pytest.mark.parametrize("change, says", [
    ({"program_sha256": "0" * 64}, "program sha256 is "),
    ({"device": "NVIDIA B200"}, "device is "),
    ({"toolchain": {"cuda": "11.0", "nccl": "2.18.1", "arch": "sm_80"}}, "toolchain is arch "),
    ({"cuco_version": "0.0.1"}, "cuco version is "),
])
def test_resume_elsewhere_or_with_another_program_is_refused(change, says, stored, tmp_path, capsys):
    run_dir = _run_dir_with(tmp_path, attrs.evolve(stored, **change))
    code = main(["run", "gemm_allgather", "--quiet", "--resume", "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "here but the run was started with" in err, err


def test_fewer_evaluations_than_already_done_are_refused_not_ignored(stored, tmp_path, capsys):
    run_dir = _run_dir_with(tmp_path, stored, evaluated=5)
    code = main(["run", "gemm_allgather", "--quiet", "--resume", "--run-dir", str(run_dir), "--evals", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "--evals 3 but the run already holds 5 evaluated candidates; pass --evals 5 or more" in err


def test_manifest_round_trips_and_is_written_atomically(stored, tmp_path):
    stored.write(tmp_path)
    assert RunManifest.read(tmp_path) == stored
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["world"] == 2 and data["workload"] == "gemm_allgather" and len(data["program_sha256"]) == 64
    assert set(data["toolchain"]) == {"cuda", "nccl", "arch"} and data["device"]


# -- GPUs -----------------------------------------------------------------------------------------------------
def test_fewer_gpus_than_the_world_is_an_up_front_error_not_no_gpu():
    with pytest.raises(CucoError, match=r"^1 GPU\(s\) found, --world 2 needs 2; run with --world 1"):
        check_gpus(Executor(world=2, devices=["0"]), 2)
    assert check_gpus(Executor(world=2, devices=[]), 2) == "unmeasured"
    assert check_gpus(Executor(world=1, devices=["0"]), 1) == "measured"


@pytest.mark.gpu
def test_cuco_run_with_a_world_larger_than_the_gpus_says_which_world_to_use(gpus, tmp_path):
    out = subprocess.run([sys.executable, "-m", "cuco.cli", "run", "gemm_allgather", "--quiet", "--world",
                          str(gpus + 1), "--run-dir", str(tmp_path / "run")], env=ENV, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"{gpus} GPU(s) found, --world {gpus + 1} needs {gpus + 1}; run with --world {gpus}" in out.stderr
    assert not (tmp_path / "run").exists()


def test_a_loser_that_reads_the_lock_file_before_its_holder_wrote_it_still_names_the_holder(tmp_path, monkeypatch):
    """The holder writes its pid just after taking the lock; a loser reading in between waits for it."""
    import threading

    from cuco import runlock

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    path = run_dir / runlock.LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held, pid not yet written
    threading.Timer(0.03, lambda: os.pwrite(fd, b"4242\n", 0)).start()
    with pytest.raises(runlock.RunLockedError, match="is being written by process 4242"):
        runlock.acquire(run_dir)
    os.close(fd)
