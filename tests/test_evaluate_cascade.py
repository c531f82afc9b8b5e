"""The measured cascade: levels in order, stop at the first failure, no-GPU behaviour, harness mapping."""

from __future__ import annotations

import types
from pathlib import Path

import attrs
import pytest

from cuco.candidate import Candidate
from cuco.design_space import DesignSpace
from cuco.errors import CucoError
from cuco.evaluate.base import CandidateEvaluator
from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US, NO_GPU_REASON, Evaluator
from cuco.evaluate.compile import Compiler
from cuco.evaluate.executor import Executor
from cuco.harness.result import Check
from cuco.toolchain import Toolchain, ToolchainError
from cuco.workload import Shape, ShapeError, Workload

FIXTURES = Path(__file__).parent / "fixtures" / "evaluate"
HARNESS_FIXTURES = Path(__file__).parent / "fixtures" / "harness"
GOOD = (FIXTURES / "good_candidate.cu").read_text()
BROKEN = (FIXTURES / "broken_candidate.cu").read_text()


def _check_copy_shape(shape: Shape, world: int) -> None:
    if len(shape.dims) != 1 or shape.dims[0] % 2:
        raise ShapeError(f"copy takes one even size N, got {shape}")


def copy_workload() -> Workload:
    """The AllGather test workload: the harness's copy plugin, the host seed and LSA candidates here."""
    return Workload(
        name="copy", description="AllGather of N bf16 per rank", dim_names=("N",),
        verify_shapes=(Shape((4100,)), Shape((1 << 16,))), bench_shapes=(Shape((1 << 24,)),),
        folder=FIXTURES, plugin_source="../harness/copy_workload.cu", seed_source="ag_host_seed.cu",
        space=lambda topology: DesignSpace(), render=lambda point: GOOD, check_shape=_check_copy_shape,
        flops=lambda shape, world: 0.0, comm_bytes=lambda shape, world: 2.0 * shape.dims[0] * (world - 1),
        libraries=(), default_world=2)


@pytest.fixture(scope="module")
def compiler(tmp_path_factory) -> Compiler:
    try:
        toolchain = Toolchain.detect(need_cublas=False)
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain here: {exc}")
    return Compiler(toolchain, cache_dir=tmp_path_factory.mktemp("cache"), jobs=2)


def cpu_cascade(compiler: Compiler, **kw) -> Evaluator:
    return Evaluator(copy_workload(), world=2, compiler=compiler, executor=Executor(world=2, devices=[]), **kw)


def cand(code: str, **kw) -> Candidate:
    return Candidate(code=code, workload="copy", **kw)


def test_is_a_measured_evaluator_with_default_shapes(compiler):
    cascade = cpu_cascade(compiler)
    assert isinstance(cascade, CandidateEvaluator) and cascade.kind == "measured"
    assert cascade.verify_shape == Shape((4100,))
    assert cascade.bench_shape == Shape((1 << 24,))
    assert not cascade.has_gpu


def test_shapes_are_checked_against_the_workload(compiler):
    with pytest.raises(ShapeError):
        cpu_cascade(compiler, bench_shape="1001")
    assert cpu_cascade(compiler, bench_shape="4096").bench_shape == Shape((4096,))
    with pytest.raises(ValueError):
        cpu_cascade(compiler, seeds=())


def test_without_gpu_runs_static_and_compile_and_marks_verify_and_bench(compiler):
    [out] = cpu_cascade(compiler).evaluate([cand(GOOD)])
    assert out.results["static"].passed and out.results["compile"].passed
    for level in ("verify", "bench"):
        assert not out.results[level].passed and out.results[level].reason == NO_GPU_REASON
    assert out.status == "unmeasured" and not out.failed and out.fitness is None and not out.metrics
    assert "no GPU" in out.feedback
    assert Path(out.results["compile"].data["so_path"]).exists()


def test_failure_at_static_stops_before_compile(compiler):
    bad = GOOD.replace("static const int kBlocks = 8;", "static const int kBlocks = 8;\nstatic void* f() "
                       "{ return fopen(\"/etc/passwd\", \"r\"); }")
    line = bad.splitlines().index('static void* f() { return fopen("/etc/passwd", "r"); }') + 1
    before = set(compiler.cache_dir.iterdir())
    [out] = cpu_cascade(compiler).evaluate([cand(bad)])
    assert set(out.results) == {"static"} and out.status == "failed:static"
    assert f"line {line}: fopen" in out.results["static"].reason
    assert f"line {line}: fopen" in out.feedback
    assert set(compiler.cache_dir.iterdir()) == before, "nothing may be compiled after a static failure"


def test_compile_failure_stops_before_verify_and_reports_the_line(compiler):
    good, broken = cpu_cascade(compiler).evaluate([cand(GOOD), cand(BROKEN)])
    assert good.results["compile"].passed
    assert set(broken.results) == {"static", "compile"} and broken.status == "failed:compile"
    assert "candidate.cu(7): error" in broken.results["compile"].reason
    assert broken.feedback.startswith("Does not compile:") and "scale_factor_that_does_not_exist" in broken.feedback


def test_each_candidate_reports_its_stage_and_is_done_as_soon_as_its_result_is_final(compiler):
    cascade = cpu_cascade(compiler)
    events: list[tuple[str, str]] = []
    cascade.on_stage = lambda cid, stage: events.append((cid, stage))
    good, broken, static = cand(GOOD), cand(BROKEN), cand("int main() { return 0; }")
    cascade.evaluate([good, broken, static])
    assert [s for c, s in events if c == static.id] == ["done"]  # refused before any compile
    assert events[0] == (static.id, "done")
    # no GPU here: a compiled candidate is final after its compile, the broken one too
    for c in (good, broken):
        assert [s for cid, s in events if cid == c.id] == ["compile", "done"]


def test_frozen_regions_are_checked_against_the_parent(compiler):
    parent = cand(GOOD)
    edited = GOOD.replace("req->lsa_barrier_count = kBlocks;", "req->lsa_barrier_count = 1;")
    child = parent.child(edited, None, "llm_diff")
    cascade = cpu_cascade(compiler, parent_code=lambda c: parent.code if c.parent_id == parent.id else None)
    [out] = cascade.evaluate([child])
    assert out.status == "failed:static" and "outside the EVOLVE blocks" in out.results["static"].reason


def test_the_workloads_host_seed_passes_static_as_a_seed_only(compiler):
    seed_code = copy_workload().seed_code()
    as_seed, as_child = cpu_cascade(compiler).evaluate([cand(seed_code, mutation="seed"),
                                                        cand(seed_code, mutation="llm_full")])
    assert as_seed.results["static"].passed and as_seed.results["compile"].passed
    assert as_child.status == "failed:static" and "no EVOLVE block" in as_child.results["static"].reason


def test_candidate_of_another_workload_is_rejected(compiler):
    [out] = cpu_cascade(compiler).evaluate([Candidate(code=GOOD, workload="gemm_allgather")])
    assert out.status == "failed:static" and "'gemm_allgather'" in out.results["static"].reason


def test_previous_results_are_replaced_not_merged(compiler):
    cascade = cpu_cascade(compiler)
    [first] = cascade.evaluate([cand(GOOD)])
    [again] = cascade.evaluate([first.evolve(code=BROKEN)])
    assert set(again.results) == {"static", "compile"}


def test_metrics_follow_the_definitions():
    m = Evaluator._metrics(time_ms=1.2, host_ms=1.8, compute_ms=1.0, comm_ms=0.4, spread=0.02)
    assert m["speedup"] == pytest.approx(1.5)
    assert m["bound_ms"] == 1.0
    assert m["overlap_efficiency"] == pytest.approx((1.8 - 1.2) / (1.8 - 1.0))
    assert m["spread"] == 0.02
    no_host = Evaluator._metrics(time_ms=1.2, host_ms=None, compute_ms=1.0, comm_ms=0.4, spread=None)
    assert "speedup" not in no_host and "overlap_efficiency" not in no_host and no_host["bound_ms"] == 1.0
    host_at_bound = Evaluator._metrics(time_ms=1.0, host_ms=1.0, compute_ms=1.0, comm_ms=0.4, spread=None)
    assert "overlap_efficiency" not in host_at_bound   # undefined when the host is already at the bound


# ---- the L2/L3 batching over a fake harness runner (the real one runs in the gpu test below) ----------------
@attrs.frozen
class MockTiming:
    max_median_ms: float
    spread: float = 0.01
    per_rank_median_ms: tuple = (1.0, 1.0)


@attrs.frozen
class MockRun:
    path: Path
    status: str
    message: str = ""
    phase: str = ""
    checks: tuple = ()
    timing: MockTiming | None = None


@attrs.frozen
class MockPart:
    timing: MockTiming
    is_comm: bool
    status: str = "ok"


def test_mocks_match_the_real_harness_types():
    """The fake harness runner below answers with these mocks; their shape must follow the real value objects."""
    result = pytest.importorskip("cuco.harness.result")
    runner = pytest.importorskip("cuco.harness.runner")
    names = lambda cls: {f.name for f in attrs.fields(cls)}
    assert names(MockRun) <= names(result.CandidateRun)
    assert names(MockTiming) <= names(result.Timing)
    assert names(MockPart) <= names(result.PartRun)
    assert {"candidates", "parts", "device", "nccl_version", "date"} <= names(result.HarnessResult)
    assert {"workload_plugin", "candidates", "dims", "world", "devices", "seeds", "verify", "bench", "warmup",
            "iters", "parts", "timeout_s", "delay_comm_us", "mode", "trace_dir", "nvshmem_lib",
            "inputs", "graph_replays", "warm_ms", "launches_per_iteration"} == names(runner.HarnessRequest)


class FakeHarnessRunner:
    """A test double for the harness runner: answers each HarnessRequest with behaviour(request) -> {path: MockRun}
    (a candidate it does not name runs ok in 1 ms) and keeps the requests."""

    def __init__(self, behaviour):
        self.behaviour, self.requests = behaviour, []

    def run(self, request, toolchain):
        self.requests.append(request)
        answers = self.behaviour(request)
        runs = tuple(answers.get(Path(p), MockRun(Path(p), "ok", timing=MockTiming(1.0))) for p in request.candidates)
        parts = {"compute": MockPart(MockTiming(0.9), False), "comm": MockPart(MockTiming(0.5), True)}
        return types.SimpleNamespace(candidates=runs, parts=parts if request.parts else {}, device="Mock H200",
                                     nccl_version="2.28.9")


def fake_cascade(compiler, harness, devices, **kw) -> Evaluator:
    """The copy workload's cascade at W = 2 over `harness`, its plugin never built."""
    cascade = Evaluator(copy_workload(), world=2, compiler=compiler, executor=Executor(world=2, devices=devices),
                        harness=harness, **kw)
    cascade._plugin_so = Path("/mock/plugin.so")
    return cascade


def test_batches_statuses_and_fitness_with_a_fake_harness_runner(compiler):
    fast = GOOD.replace("kBlocks = 8", "kBlocks = 4")
    wrong = GOOD.replace("kBlocks = 8", "kBlocks = 2")
    gin = GOOD.replace("kBlocks = 8", "kBlocks = 1")
    codes = [GOOD, fast, wrong, gin, copy_workload().seed_code()]
    sos = {code: o.so_path for code, o in zip(codes, compiler.compile_many(codes))}
    seed_so = sos[codes[-1]]

    def behaviour(request):
        if not request.bench:
            check = Check(1, 1, False, 0.0, 0.0, 8200, 0, 4100)
            return {sos[wrong]: MockRun(sos[wrong], "verify_failed", "exact AllGather comparison: 0 wrong, 4100 NaN/Inf",
                                        checks=(check,)),
                    sos[gin]: MockRun(sos[gin], "unsupported", "GIN needs an RDMA NIC; none on this host")}
        return {seed_so: MockRun(seed_so, "ok", timing=MockTiming(2.0)),
                sos[GOOD]: MockRun(sos[GOOD], "ok", timing=MockTiming(1.6, spread=0.03)),
                sos[fast]: MockRun(sos[fast], "ok", timing=MockTiming(1.0))}

    harness = FakeHarnessRunner(behaviour)
    cascade = fake_cascade(compiler, harness, ["0", "1"], seeds=(1, 2), iters=20, warmup=3)
    good, quick, bad, ginned = cascade.evaluate([cand(GOOD), cand(fast), cand(wrong), cand(gin)])

    verify_req, bench_req = harness.requests
    assert not verify_req.bench and verify_req.verify and verify_req.seeds == (1, 2) and verify_req.dims == (4100,)
    assert len(verify_req.candidates) == 4 and verify_req.devices == (0, 1)
    assert verify_req.delay_comm_us == DEFAULT_VERIFY_DELAY_US > 0  # L2 verifies under delayed arrival
    assert bench_req.bench and bench_req.parts and bench_req.dims == (1 << 24,) and bench_req.iters == 20
    assert Path(bench_req.candidates[0]) == seed_so and len(bench_req.candidates) == 3   # host seed in the batch
    # figures of record from full-entropy bf16 inputs (what torch's anchors see); L2 verifies on 256 levels
    assert bench_req.inputs == "full" and verify_req.inputs == "q256"

    assert bad.status == "failed:verify" and bad.results["verify"].reason.startswith("wrong result: exact AllGather")
    assert "(seed 1, rank 1: 0 of 8200 elements outside tolerance, 4100 NaN/Inf" in bad.results["verify"].reason
    assert bad.results["verify"].data["checks"][0]["n_nan"] == 4100
    assert "bench" not in bad.results and "Verification at 4100 (seeds 1,2) failed" in bad.feedback
    assert ginned.results["verify"].reason.startswith("unsupported here: GIN needs an RDMA NIC")

    assert good.status == quick.status == "passed"
    assert quick.fitness == pytest.approx(2.0) and good.fitness == pytest.approx(2.0 / 1.6)
    assert quick.metrics["host_ms"] == 2.0 and quick.metrics["bound_ms"] == 0.9
    assert quick.metrics["compute_ms"] == 0.9 and quick.metrics["comm_ms"] == 0.5
    assert quick.metrics["overlap_efficiency"] == pytest.approx((2.0 - 1.0) / (2.0 - 0.9))
    assert good.metrics["spread"] == 0.03
    data = quick.results["bench"].data
    assert data["device"] == "Mock H200" and data["nccl_version"] == "2.28.9" and data["date"]
    assert data["host_timed_in_same_run"] and data["shape"] == str(1 << 24) and data["inputs"] == "full"
    assert "1.000 ms vs host 2.000 ms (speedup 2.00x)" in quick.feedback


def test_verify_is_split_over_gpu_groups(compiler):
    codes = [GOOD, GOOD.replace("kBlocks = 8", "kBlocks = 4"), GOOD.replace("kBlocks = 8", "kBlocks = 2")]

    def behaviour(request):
        if request.devices == (2, 3) and not request.bench:
            raise CucoError("NCCL init failed on devices 2,3")
        return {}

    harness = FakeHarnessRunner(behaviour)
    out = fake_cascade(compiler, harness, ["0", "1", "2", "3"]).evaluate([cand(c) for c in codes])
    verify = [r for r in harness.requests if not r.bench]
    assert sorted(r.devices for r in verify) == [(0, 1), (2, 3)]
    assert sorted(len(r.candidates) for r in verify) == [1, 2]
    on_bad_group = {str(p) for r in verify if r.devices == (2, 3) for p in r.candidates}
    for c in out:
        if c.results["compile"].data["so_path"] in on_bad_group:
            assert c.status == "failed:verify"
            assert c.results["verify"].reason == "harness run failed: NCCL init failed on devices 2,3"
        else:
            assert c.status == "passed"
    [bench] = [r for r in harness.requests if r.bench]
    assert bench.devices == (0, 1)


def test_host_seed_failure_leaves_fitness_unset_with_a_reason(compiler):
    seed_so = compiler.compile(copy_workload().seed_code()).so_path
    harness = FakeHarnessRunner(lambda r: {seed_so: MockRun(seed_so, "crash", "SIGSEGV", phase="launch")}
                                if r.bench else {})
    [out] = fake_cascade(compiler, harness, ["0", "1"]).evaluate([cand(GOOD)])
    assert out.results["bench"].passed and out.fitness is None and "speedup" not in out.metrics
    assert out.results["bench"].data["host_error"] == "crashed in launch: SIGSEGV"
    assert "host seed not timed: crashed in launch: SIGSEGV" in out.feedback


# ---- on a GPU machine: the real harness ----------------------------------------------------------------------
@pytest.mark.gpu
def test_real_cascade_on_two_gpus(gpus):
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs, found {gpus}")
    lsa = (FIXTURES / "ag_lsa_candidate.cu").read_text()
    wrong = (FIXTURES / "ag_wrong_candidate.cu").read_text()
    cascade = Evaluator(copy_workload(), world=2, bench_shape=(1 << 24,), iters=20, warmup=3)
    assert cascade.has_gpu
    good, bad, broken = cascade.evaluate([cand(lsa), cand(wrong), cand(BROKEN)])
    assert good.status == "passed", good.feedback
    assert good.metrics["time_ms"] > 0 and good.metrics["host_ms"] > 0 and good.fitness > 0
    assert {"compute_ms", "comm_ms", "bound_ms", "spread"} <= set(good.metrics)
    assert bad.status == "failed:verify" and "wrong result" in bad.results["verify"].reason
    assert broken.status == "failed:compile"
    print("\n" + good.feedback + "\n" + str(good.results["bench"].data))


def test_feedback_headline_carries_the_reason_after_a_bare_heading():
    from cuco.evaluate.cascade import feedback_headline

    fb = "Verification at 2048x8x4x128x1 (seeds 1,2) failed:\nrank 1: the launch entry point returned 104\nmore"
    assert feedback_headline(fb) == ("Verification at 2048x8x4x128x1 (seeds 1,2) failed: rank 1: the launch entry "
                                     "point returned 104")
    assert feedback_headline("Correct at 1x2 (seeds 1); at 3x4: 1.000 ms.") == "Correct at 1x2 (seeds 1); at 3x4: 1.000 ms."
    assert feedback_headline("") == ""
    assert len(feedback_headline("Does not compile:\n" + "x" * 1000)) == 300

