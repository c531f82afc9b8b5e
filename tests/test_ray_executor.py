"""The Ray executor on a local Ray instance that the executor itself starts here (CPU; GPU groups declared as the
custom resource 'cuco_gpu', and 2 'GPU' this machine lacks), beside a stale cluster file, in its own temp dir and
home: a search's compiles and (modelled, labelled) evaluations spread over placement groups, a worker killed
mid-task is retried and its candidate recorded once, retries that run out are an infrastructure failure, the
frozen-region rule holds in a run, declared GPUs a node lacks are an infrastructure failure, and bad input (no
Ray, an unreachable head, a port that is not Ray, nodes smaller than a group) is refused before any work.
tests/test_ray_cluster.py runs the documented `ray start --head` flow."""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from cuco.candidate import Candidate  # noqa: E402
from cuco.db import CandidateDB  # noqa: E402
from cuco.design_space import Directives, Topology  # noqa: E402
from cuco.evaluate.ray_executor import (  # noqa: E402
    RayEvaluator,
    RayUnavailableError,
    check_reachable,
    measured_evaluator,
)
from cuco.evaluate.modelled import modelled_evaluator  # noqa: E402
from cuco.run_options import RunOptions  # noqa: E402
from cuco.run import Run  # noqa: E402
from cuco.search import api  # noqa: E402
from cuco.toolchain import cache_dir  # noqa: E402
from cuco.workloads import get  # noqa: E402

WL = get("gemm_allgather")
SHAPE = "8192,8192,8192"
FACTORY = functools.partial(modelled_evaluator, "gemm_allgather", SHAPE, 2)


STALE = "127.0.0.1:1"  # a head an earlier `ray start` recorded, long gone


@pytest.fixture(scope="module")
def cluster():
    """The instance the first RayEvaluator without an address starts, in a temp dir of its own (RAY_TMPDIR) that
    holds a stale cluster file, and a home of its own (Ray writes an auth token there)."""
    temp = Path(tempfile.mkdtemp(prefix="cuco-ray-"))  # short: Ray's socket paths live under it
    (temp / "ray").mkdir()
    (temp / "ray" / "ray_current_cluster").write_text(STALE)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUCO_CACHE_DIR", str(cache_dir()))  # the compile cache stays where it was
        for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "CUDA_VISIBLE_DEVICES"):  # Ray holds declared GPUs to the last
            mp.delenv(name, raising=False)
        mp.setenv("RAY_TMPDIR", str(temp))
        mp.setenv("HOME", str(temp / "home"))
        try:
            ev = RayEvaluator(FACTORY, world=2, gpu_resource="cuco_gpu", init_kwargs={
                "num_cpus": 4, "num_gpus": 2, "resources": {"cuco_gpu": 4}, "include_dashboard": False})
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the fault-injecting factories below
            yield ev
        finally:
            ray.shutdown()
            shutil.rmtree(temp, ignore_errors=True)


def test_without_an_address_a_local_instance_starts_beside_a_stale_cluster_file(cluster):
    gcs = ray.get_runtime_context().gcs_address
    assert gcs and gcs != STALE
    assert ray.cluster_resources().get("cuco_gpu") == 4  # this instance, as the fixture asked for it


class _KillOnce:
    """Test fault injection: the first attempt at each candidate ends its worker process mid-task."""

    def __init__(self, marker_dir: str, always: bool = False):
        self.marker_dir, self.always = marker_dir, always
        self.kind = "modelled"
        self.on_stage = None

    def evaluate(self, candidates):
        for c in candidates:
            marker = Path(self.marker_dir) / c.id
            if self.always or not marker.exists():
                marker.touch()
                os._exit(1)  # the worker dies as a crashed or preempted node would
        return FACTORY().evaluate(candidates)


def _kill_once(marker_dir: str, always: bool = False) -> _KillOnce:
    return _KillOnce(marker_dir, always)


def test_a_search_spreads_its_evaluations_and_records_each_candidate_once(cluster, tmp_path):
    ev = RayEvaluator(FACTORY, world=2, gpu_resource="cuco_gpu")
    assert ev.kind == "modelled"
    space = WL.space(Topology(world=2, gin_available=False, nvshmem_available=False))
    result = api.start(tmp_path / "run", WL, ev, space=space, seed=1, islands=2).run(12)
    assert result.evaluated == 12 and result.evaluator_kind == "modelled"
    with CandidateDB(tmp_path / "run" / "candidates.db", readonly=True) as db:
        cands = db.all()
    assert len(cands) == len({c.id for c in cands}) == 12
    assert all(c.status in ("unmeasured", "failed:static") for c in cands), {c.status for c in cands}
    assert sum(c.fitness is not None for c in cands) >= 10  # modelled fitness, labelled by the kind


def test_a_worker_killed_mid_task_is_retried_and_nothing_is_lost_or_doubled(cluster, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    ev = RayEvaluator(functools.partial(_kill_once, str(marks)), world=2, gpu_resource="cuco_gpu", max_retries=2,
                      compile_fanout=False)
    space = WL.space(Topology(world=2, gin_available=False, nvshmem_available=False))
    result = api.start(tmp_path / "run", WL, ev, space=space, seed=2, islands=2).run(6)
    with CandidateDB(tmp_path / "run" / "candidates.db", readonly=True) as db:
        cands = db.all()
    assert result.evaluated == 6 and len({c.id for c in cands}) == len(cands) == 6
    assert len(list(marks.iterdir())) == 6  # every candidate's first worker died ...
    assert all(c.fitness is not None for c in cands)  # ... and its retry finished it


def test_retries_that_run_out_are_an_infrastructure_failure_not_the_candidates(cluster, tmp_path):
    ev = RayEvaluator(functools.partial(_kill_once, str(tmp_path), True), world=2, gpu_resource="cuco_gpu",
                      max_retries=1, compile_fanout=False)
    c = Candidate(code=WL.render(Directives.from_label("lsa/deferred/world/cta/whole")), workload=WL.name,
                  directives=Directives.from_label("lsa/deferred/world/cta/whole"))
    (out,) = ev.evaluate([c])
    assert out.id == c.id and out.status == "unmeasured" and not out.failed
    assert "infrastructure" in out.feedback and "lost 2 time(s)" in out.feedback


def test_a_group_larger_than_any_node_is_refused_before_any_work(cluster):
    with pytest.raises(RayUnavailableError, match="no node of the Ray cluster has 8 'cuco_gpu'"):
        RayEvaluator(FACTORY, world=8, gpu_resource="cuco_gpu")
    with pytest.raises(RayUnavailableError, match="no node of the Ray cluster has 4 'GPU'"):
        RayEvaluator(FACTORY, world=4)  # this CPU cluster declares 2


def _frozen_edit(c: Candidate) -> Candidate:
    """`c` with one line of frozen code (after the EVOLVE blocks) changed."""
    end = c.code.index("// EVOLVE-BLOCK-END")
    tail = c.code[end:]
    line = next(x for x in tail.splitlines()[1:] if x.strip() and not x.startswith("//"))
    return c.child(c.code[:end] + tail.replace(line, line + " /* x */ ;", 1), c.directives, "llm_diff")


def test_the_frozen_region_rule_holds_in_a_run_on_ray(cluster, tmp_path):
    opts = RunOptions(workload="gemm_allgather", executor="ray", run_dir=str(tmp_path / "run"), progress=False)
    with Run.open(opts, on_event=lambda _: None) as run:
        point = Directives.from_label("lsa/deferred/world/cta/whole")
        parent = Candidate(code=WL.render(point), workload=WL.name, directives=point)
        run.search_loop.db.add(parent)
        (out,) = run.evaluator.evaluate([_frozen_edit(parent)])
    assert out.status == "failed:static", (out.status, out.feedback[:300])
    assert "code outside the EVOLVE blocks was changed" in out.results["static"].reason


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this node has GPUs: none of its 2 are missing")
def test_gpus_a_node_declares_but_lacks_are_an_infrastructure_failure(cluster):
    ev = RayEvaluator(functools.partial(measured_evaluator, "gemm_allgather", SHAPE, 2), world=2,
                      compile_fanout=False)
    point = Directives.from_label("lsa/deferred/world/cta/whole")
    (out,) = ev.evaluate([Candidate(code=WL.render(point), workload=WL.name, directives=point)])
    assert out.status == "unmeasured" and not out.failed, (out.status, out.feedback[:300])
    assert out.feedback.startswith("infrastructure:") and "declares but does not have" in out.feedback


def _listener(answer: bytes | None) -> int:
    """A local TCP port that accepts and then says `answer` (None: nothing) — a service that is not Ray."""
    srv = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve() -> None:
        while True:
            conn, _ = srv.accept()
            held.append(conn)  # kept open: a silent peer, not a closed one
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


@pytest.mark.parametrize("answer", [None, b"HTTP/1.1 400 Bad Request\r\n\r\n"], ids=["silent", "http"])
def test_a_port_that_is_not_ray_is_refused_in_seconds(answer):
    start = time.monotonic()
    with pytest.raises(RayUnavailableError, match="accepts connections but is not a Ray head"):
        check_reachable(f"127.0.0.1:{_listener(answer)}", timeout_s=1)
    assert time.monotonic() - start < 3


def test_cuco_run_names_a_port_that_is_not_ray(tmp_path, capsys):
    from cuco.cli import main

    rc = main(["run", "gemm_allgather", "--executor", "ray", "--address", f"127.0.0.1:{_listener(b'SSH-2.0-x')}",
               "--run-dir", str(tmp_path / "r"), "--evals", "2", "--quiet"])
    assert rc == 2 and "is not a Ray head" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
