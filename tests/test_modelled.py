"""ModelledEvaluator: the analytic model is labelled modelled everywhere, runs the real static check, and
behaves like the physics it encodes (overlap helps, tiny chunks and wide barriers cost)."""

from __future__ import annotations

import pytest
from test_search_workload import SHAPE, TOPOLOGY, make_workload, render

from cuco.candidate import Candidate
from cuco.design_space import KiB, MiB, Directives
from cuco.evaluate.base import CandidateEvaluator
from cuco.evaluate.modelled import Hardware, ModelledEvaluator, model_time
from cuco.workload import Shape, ShapeError

W = make_workload()
SPACE = W.space(TOPOLOGY)
EV = ModelledEvaluator(W, SHAPE, 2)
POINT = next(iter(SPACE.points()))


def cand(point: Directives, code: str | None = None) -> Candidate:
    return Candidate(code=code if code is not None else render(point), workload=W.name, directives=point)


def test_is_an_evaluator_of_kind_modelled_and_labels_everything():
    assert isinstance(EV, CandidateEvaluator) and EV.kind == "modelled"
    out = EV.evaluate([cand(SPACE.conservative())])[0]
    assert out.status == "unmeasured" and out.ranked and out.metrics["modelled"] == 1.0  # never "passed"
    for level in ("compile", "verify", "bench"):
        assert out.results[level].data["modelled"] is True
    assert "not measured" in out.results["bench"].reason
    assert out.results["compile"].data["skipped"] and "not compiled" in out.results["compile"].reason
    assert out.fitness == pytest.approx(out.metrics["host_ms"] / out.metrics["time_ms"])


def test_runs_the_real_static_check_first():
    bad = render(SPACE.conservative()).replace("return 0;\n}\n", 'system("rm -rf /");\n  return 0;\n}\n', 1)
    out = EV.evaluate([cand(SPACE.conservative(), bad)])[0]
    assert out.status == "failed:static" and "system" in out.results["static"].reason and out.fitness is None


def test_candidate_without_directives_fails_at_bench_with_the_fix():
    c = Candidate(code=render(SPACE.conservative()), workload=W.name, directives=None)
    out = EV.evaluate([c])[0]
    assert out.status == "failed:bench" and "DIRECTIVES" in out.results["bench"].reason


def test_the_model_encodes_overlap_chunking_and_sync_costs():
    flops, comm = W.flops(SHAPE, 2), W.comm_bytes(SHAPE, 2)
    hw = Hardware()
    deferred = model_time(Directives("lsa", "deferred", "world", "cta", 0), flops, comm, 2, hw)
    overlap = model_time(Directives("lsa", "stream_overlap", "signal", "warp", 4 * MiB), flops, comm, 2, hw)
    assert deferred.total == pytest.approx(deferred.compute + deferred.comm + deferred.sync + deferred.launch)
    assert overlap.total < deferred.total  # overlap hides communication
    assert overlap.total >= max(overlap.compute, overlap.comm)  # never beats the bound
    tiny = model_time(Directives("lsa", "stream_overlap", "world", "warp", 64 * KiB), flops, comm, 2, hw)
    assert tiny.total > overlap.total  # 1024 barriers and short transfers cost
    gin = model_time(Directives("gin", "stream_overlap", "signal", "warp", 4 * MiB), flops, comm, 2, hw)
    assert gin.comm > overlap.comm  # a NIC is slower than NVLink
    # the modelled conservative point lands near the measured host anchor (8192^3: 1.758 ms), within 15 %
    assert deferred.total * 1e3 == pytest.approx(1.758, rel=0.15)


def test_bad_shape_is_refused():
    with pytest.raises(ShapeError):
        ModelledEvaluator(W, Shape((8191, 8192, 8192)), 2)


def test_takes_the_measured_evaluators_arguments_and_a_shape_as_text():
    import inspect

    from cuco import workloads
    from cuco.evaluate.cascade import Evaluator
    from cuco.evaluate.modelled import MEASURED_ONLY

    wl = workloads.get("gemm_allgather")
    want = wl.parse_shape("8192,8192,8192")
    for ev in (ModelledEvaluator(wl, "8192,8192,8192", 2), ModelledEvaluator(wl, world=2, bench_shape="8192,8192,8192"),
               ModelledEvaluator(wl, 2, bench_shape=[8192, 8192, 8192], iters=10, seeds=(1,))):
        assert ev.world == 2 and ev.shape == ev.bench_shape == want
    assert ModelledEvaluator(wl).world == wl.default_world and ModelledEvaluator(wl).shape == wl.bench_shapes[0]
    measured = set(inspect.signature(Evaluator.__init__).parameters) - {"self"}
    mine = set(inspect.signature(ModelledEvaluator.__init__).parameters) - {"self", "measured_only"}
    assert measured <= mine | set(MEASURED_ONLY)  # every argument of the measured Evaluator is accepted
    with pytest.raises(TypeError, match="iter"):
        ModelledEvaluator(wl, world=2, iter=10)
    with pytest.raises(TypeError, match="once"):
        ModelledEvaluator(wl, "8192,8192,8192", 2, bench_shape="8192,8192,8192")


def test_the_static_check_gets_the_parent_candidate_as_the_measured_one_does():
    parent = Candidate(code=render(POINT), workload=W.name, directives=POINT)
    child = parent.child(render(POINT), POINT, "directive")
    asked = []
    ev = ModelledEvaluator(W, SHAPE, 2, parent_code=lambda c: asked.append(c) or parent.code)
    ev.evaluate([child])
    assert asked == [child]
