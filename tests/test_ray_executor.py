"""The Ray executor on a local Ray cluster started here (CPU; GPU groups declared as the custom resource
'cuco_gpu'): a search's compiles and (modelled, labelled) evaluations spread over placement groups, a worker killed
mid-task is retried and its candidate recorded once, retries that run out are an infrastructure failure, and bad
input (no Ray, an unreachable head, nodes smaller than a group) is refused before any work."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
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
    modelled_evaluator,
)
from cuco.search import api  # noqa: E402
from cuco.workloads import get  # noqa: E402

WL = get("gemm_allgather")
SHAPE = "8192,8192,8192"
FACTORY = functools.partial(modelled_evaluator, "gemm_allgather", SHAPE, 2)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=4, resources={"cuco_gpu": 4}, include_dashboard=False, log_to_driver=False)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the fault-injecting factories below
    yield
    ray.shutdown()


class _KillOnce:
    """Test fault injection: the first attempt at each candidate ends its worker process mid-task."""

    def __init__(self, marker_dir: str, always: bool = False):
        self.marker_dir, self.always = marker_dir, always
        self.kind = "modelled"

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
    with pytest.raises(RayUnavailableError, match="no node of the Ray cluster has 2 'GPU'"):
        RayEvaluator(FACTORY, world=2)  # this CPU cluster has no real GPU


def test_an_unreachable_head_is_refused_in_seconds():
    with pytest.raises(RayUnavailableError, match="does not answer"):
        check_reachable("127.0.0.1:1", timeout_s=2)
    with pytest.raises(RayUnavailableError, match="write host:port"):
        check_reachable("head-without-port")


def test_without_ray_the_error_names_the_install():
    code = ("import sys; sys.modules['ray'] = None\n"
            "from cuco.evaluate.ray_executor import import_ray, RayUnavailableError\n"
            "try:\n    import_ray()\nexcept RayUnavailableError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert 'pip install -e ".[ray]"' in out.stdout, out.stdout + out.stderr


def test_cuco_run_refuses_an_unreachable_head_before_writing_anything(tmp_path, capsys):
    from cuco.cli import main

    run = tmp_path / "run"
    rc = main(["run", "gemm_allgather", "--executor", "ray", "--address", "127.0.0.1:1", "--run-dir", str(run),
               "--evals", "2", "--quiet"])
    assert rc == 2 and "does not answer" in capsys.readouterr().err
    assert not run.exists()
    assert main(["run", "gemm_allgather", "--address", "127.0.0.1:1", "--run-dir", str(run)]) == 2
