"""Records keyed by candidate id: a batch refuses two candidates with one id, and every runner puts each level's
result on the candidate it belongs to, whatever the batch's order and whichever candidates fail where."""

from __future__ import annotations

import hashlib
import types
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.errors import CucoError
from cuco.evaluate.batch import Batch
from doubles import ScriptedCascade

FIX = r"share the id .*Candidate\.child\(\.\.\.\) or a fresh Candidate\(\.\.\.\); evolve\(\) keeps the id"
FIXTURES = Path(__file__).parent / "fixtures" / "evaluate"
CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
FAILS = st.sampled_from([None, *LEVELS])   # the level a candidate fails at (None: none)


def cand(code: str) -> Candidate:
    return Candidate(code=code, workload="copy")


def scripted(fails: list[str | None], order: list[int]) -> list[Candidate]:
    """Candidates k = 0.. that fail where `fails` says, each code its own length, in `order`."""
    codes = [f"candidate {k} " + "x" * k + (f" fail:{lv}" if lv else "") for k, lv in enumerate(fails)]
    return [cand(codes[k]) for k in order]


@st.composite
def batches(draw, max_size: int = 7):
    fails = draw(st.lists(FAILS, max_size=max_size))
    return fails, draw(st.permutations(range(len(fails))))


def expected_status(code: str, has_gpu: bool) -> str:
    failed = next((lv for lv in LEVELS if f"fail:{lv}" in code), None)
    if failed in ("static", "compile"):
        return f"failed:{failed}"
    if not has_gpu:
        return "unmeasured"
    return f"failed:{failed}" if failed else "passed"


# ---- the batch --------------------------------------------------------------------------------------------------
def test_a_batch_keeps_input_order_and_updates_by_id():
    a, b, c = cand("a"), cand("b"), cand("c")
    batch = Batch([a, b, c])
    assert batch.ids == [a.id, b.id, c.id] and len(batch) == 3 and b.id in batch
    batch.record(c.id, LevelResult("static", False, "no"))
    batch.measure(a.id, {"time_ms": 2.0}, 1.5)
    assert batch.in_order({c.id, a.id}) == [a.id, c.id]
    out = batch.candidates()
    assert [x.id for x in out] == [a.id, b.id, c.id]
    assert out[2].results["static"].reason == "no" and not out[0].results and out[0].fitness == 1.5
    with pytest.raises(KeyError, match="not in this batch"):
        batch.record(cand("d").id, LevelResult("static", True))


def test_a_batch_of_copies_sharing_an_id_is_refused_naming_the_fix():
    c = cand("a")
    with pytest.raises(CucoError, match=FIX):
        Batch([c, cand("b"), c.evolve(code="a2")])
    Batch([c, c.child("a2", None, "manual")])   # the fix: a child has its own id


@pytest.mark.parametrize("runner", ["cascade", "modelled", "program"])
def test_every_runner_refuses_a_batch_with_two_candidates_of_one_id(runner, tmp_path):
    """evolve() keeps the id, so [c, c.evolve(code=...)] would put two candidates' records under one key."""
    c = cand("a")
    if runner == "cascade":
        evaluator = ScriptedCascade()
    elif runner == "modelled":
        from cuco.evaluate.modelled import ModelledEvaluator
        from cuco.workloads import get

        evaluator, c = ModelledEvaluator(get("gemm_allgather"), world=2), Candidate(code="a", workload="gemm_allgather")
    else:
        from cuco.program.evaluator import ProgramEvaluator
        from cuco.program.source import HostProgram

        evaluator = ProgramEvaluator(HostProgram.load(CORPUS / "rs_grad_shard.cu"), work_dir=tmp_path)
        evaluator.static_level = lambda c: LevelResult("static", True)
        evaluator._build = lambda code, name: (None, "not built")   # nothing reaches nvcc
    with pytest.raises(CucoError, match=FIX):
        evaluator.evaluate([c, c.evolve(code=c.code + "// another")])


# ---- every runner records by id ---------------------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(batches(), st.booleans())
def test_the_cascade_puts_each_record_on_its_own_candidate(drawn, has_gpu):
    fails, order = drawn
    given_ = scripted(fails, order)
    seen: list[tuple[str, str]] = []
    runner = ScriptedCascade(has_gpu=has_gpu)
    runner.on_stage = lambda cid, stage: seen.append((cid, stage))
    out = runner.evaluate(given_)
    assert [c.id for c in out] == [c.id for c in given_]
    for c in out:
        assert c.status == expected_status(c.code, has_gpu), c.code
        assert all(r.data["code"] == c.code for r in c.results.values() if "code" in r.data)
        assert c.fitness == (len(c.code) if c.status == "passed" else None)
        assert (c.id, "done") in seen   # every candidate's result is told final


def assert_own_records(out: list[Candidate], given_: list[Candidate], has_gpu: bool, time_of) -> None:
    """Each output is its input's candidate: same order and ids, the status its code scripts, every failure's reason
    naming its own code and, where it passed, the time `time_of(code)` of its own code."""
    assert [c.id for c in out] == [c.id for c in given_]
    for c in out:
        assert c.status == expected_status(c.code, has_gpu), (c.code, c.feedback)
        for r in c.results.values():
            assert r.passed or r.data.get("not_run_here") or c.code in r.reason, (c.code, r)
        if c.status == "passed":
            assert c.metrics["time_ms"] == pytest.approx(time_of(c.code)), c.code


def _ms(code: str) -> float:
    return len(code) / 1000.0


# ---- the plugin harness's Evaluator over a scripted compiler and harness ----------------------------------------
def _so(code: str) -> Path:
    return Path("/so") / (hashlib.sha1(code.encode()).hexdigest() + ".so")


class ScriptedCompiler:
    """A compiler (cuco.evaluate.compile.Compiler) that builds nothing: 'fail:compile' fails, naming the code; it
    reports the compiles done in reverse order, as a pool may finish them."""

    toolchain = None

    def compile(self, code, *args, **kw):
        ok = "fail:compile" not in code
        return types.SimpleNamespace(ok=ok, so_path=_so(code) if ok else None, cached=False, key="k", seconds=0.0,
                                     log_excerpt="" if ok else f"does not compile: {code}")

    def compile_many(self, codes, *args, on_done=None):
        outcomes = [self.compile(code) for code in codes]
        for k in reversed(range(len(codes))):
            if on_done:
                on_done(k, outcomes[k])
        return outcomes


class ScriptedHarness:
    """A harness runner that runs nothing: each shared object's run follows its code's script; the host seed takes
    2 ms, a candidate len(code) µs."""

    def __init__(self, codes: dict[str, str], seed_so: Path):
        self.codes, self.seed_so = codes, seed_so

    def run(self, request, toolchain):
        runs = [self._run(Path(p), request.bench) for p in request.candidates]
        return types.SimpleNamespace(candidates=runs, parts={}, device="scripted", date="today")

    def _run(self, so: Path, bench: bool):
        code = self.codes.get(str(so), "")
        fail = "fail:bench" if bench else "fail:verify"
        if fail in code:
            return types.SimpleNamespace(path=so, status="crash", message=f"scripted crash of {code}", timing=None)
        ms = 2.0 if so == self.seed_so else _ms(code)
        return types.SimpleNamespace(path=so, status="ok", message="", seconds=0.0,
                                     timing=types.SimpleNamespace(max_median_ms=ms, spread=0.0))


def harness_evaluator(given_: list[Candidate], has_gpu: bool):
    from cuco.evaluate.cascade import Evaluator
    from cuco.evaluate.executor import Executor
    from cuco.kit.compute import LinkOptions
    from cuco.workload import Shape, Workload

    wl = Workload(name="copy", description="scripted", dim_names=("N",), verify_shapes=(Shape((4096,)),),
                  bench_shapes=(Shape((1 << 20,)),), folder=FIXTURES, plugin_source="../harness/copy_workload.cu",
                  seed_source="ag_host_seed.cu", space=lambda topology: None, render=lambda point: "",
                  check_shape=lambda shape, world: None, flops=lambda shape, world: 0.0,
                  comm_bytes=lambda shape, world: 0.0, libraries=(), default_world=2)
    codes = {str(_so(c.code)): c.code for c in given_}
    groups = Executor(world=2, devices=["0", "1", "2", "3"] if has_gpu else [])   # verify: two harness processes
    ev = Evaluator(wl, world=2, compiler=ScriptedCompiler(), executor=groups,
                   harness=ScriptedHarness(codes, _so(wl.seed_code())))
    ev._plugin_so, ev._link_options = Path("/so/plugin.so"), LinkOptions((), (), ())
    ev.static_level = lambda c: LevelResult("static", "fail:static" not in c.code, f"rejected: {c.code}")
    return ev


@settings(max_examples=40, deadline=None)
@given(batches(), st.booleans())
def test_the_harness_evaluator_puts_each_record_on_its_own_candidate(drawn, has_gpu):
    """Verify splits the batch over two GPU groups and runs them at once; bench times the host seed first."""
    given_ = scripted(*drawn)
    out = harness_evaluator(given_, has_gpu).evaluate(given_)
    assert_own_records(out, given_, has_gpu, _ms)
    assert all(c.fitness == pytest.approx(2.0 / _ms(c.code)) for c in out if c.status == "passed")


# ---- a user's program's ProgramEvaluator over a scripted build and launcher -------------------------------------
class ScriptedProgramLauncher:
    """A program launcher that runs nothing: the reference reads back b'ok' in 4 ms; a candidate's binary (named by
    its id) follows its code's script: it crashes where 'fail:verify' (delayed run) or 'fail:bench' says, else
    reads back what the reference does in len(code) µs."""

    def __init__(self, codes: dict[str, str]):
        self.codes = codes

    def run(self, binary, group, env, timeout_s, work_dir):
        from cuco.program.observation import Observation

        code = self.codes.get(binary.name, "")
        fail = "fail:verify" if "CUCO_DELAY_COMM_US" in env else "fail:bench"
        if fail in code:
            return None, f"scripted crash of {code}"
        ms = 4.0 if binary.name == "reference" else _ms(code)
        return Observation({(0, 0): b"ok"}, ((0, 0, 0, 10 * ms), (0, 0, 1, ms), (0, 0, 2, ms))), ""


@pytest.fixture(scope="module")
def host_program():
    from cuco.program.source import HostProgram

    return HostProgram.load(CORPUS / "rs_grad_shard.cu")


@settings(max_examples=40, deadline=None)
@given(drawn=batches(), has_gpu=st.booleans())
def test_the_program_evaluator_puts_each_record_on_its_own_candidate(host_program, tmp_path_factory, drawn,
                                                                     has_gpu):
    from cuco.evaluate.executor import Executor
    from cuco.program.evaluator import ProgramEvaluator

    given_ = scripted(*drawn)
    launcher = ScriptedProgramLauncher({c.id: c.code for c in given_})
    ev = ProgramEvaluator(host_program, world=2, executor=Executor(world=2, devices=["0", "1"] if has_gpu else []),
                          timed_runs=2, work_dir=tmp_path_factory.mktemp("work"), launcher=launcher)
    ev.static_level = lambda c: LevelResult("static", "fail:static" not in c.code, f"rejected: {c.code}")
    ev._build = lambda code, name: (None, f"does not compile: {code}") if "fail:compile" in code else (
        Path("/bin") / name.removeprefix("candidate-"), "")
    ev._reference = (Path("/bin/reference"), launcher.run(Path("/bin/reference"), None, {}, 0, None)[0])
    out = ev.evaluate(given_)
    assert_own_records(out, given_, has_gpu, _ms)
    assert all(c.fitness == pytest.approx(4.0 / _ms(c.code)) for c in out if c.status == "passed")
