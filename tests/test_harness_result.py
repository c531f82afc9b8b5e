"""CPU tests: result JSON parsing and validation, the request's command line, the harness's statistics and
JSON writer (through a small self-test program), and the runner's crash/hang/restart logic (through a test
double of the harness binary)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest

from cuco.harness import HarnessRequest, HarnessRequestError, HarnessResult, HarnessResultError, run_harness
from cuco.harness.build import include_dir
from cuco.harness.runner import gpu_count, interpret
from cuco.process import ProcessOutcome
from cuco.toolchain import Toolchain, ToolchainError, cache_dir, content_hash, csrc_dir

FIXTURES = Path(__file__).parent / "fixtures" / "harness"


def sample() -> dict:
    timing = {"per_rank_ms": [[1.0, 2.0, 3.0], [2.0, 2.0, 4.0]], "per_rank_median_ms": [2.0, 2.0],
              "per_rank_min_ms": [1.0, 2.0], "per_rank_p10_ms": [1.2, 2.0], "per_rank_p90_ms": [2.8, 3.6],
              "max_median_ms": 2.0, "max_rank": 0, "min_ms": 1.0, "spread": 0.8, "iters": 3, "warmup": 1}
    check = {"seed": 1, "rank": 0, "passed": True, "max_abs_err": 0.0, "rel_l2_err": 0.0, "n_checked": 10,
             "n_bad": 0, "n_nan": 0, "message": ""}
    return {
        "schema": 1, "status": "ok", "message": "", "device": "NVIDIA H200", "sm_count": 132,
        "driver_version": "13.0", "driver_release": "580.159.04", "cuda_runtime_version": "13.0",
        "nccl_version": "2.28.9", "nccl_header_version": "2.28.9", "world": 2, "devices": [0, 1], "dims": [8, 8, 8],
        "seeds": [1, 2], "workload": "w.so", "date": "2026-11-22T00:00:00Z", "hostname": "h", "elapsed_s": 3.5,
        "current": {"kind": "harness", "index": -1, "phase": "done"},
        "parts": {"comm": {"is_comm": True, "status": "ok", "message": "", "timing": timing},
                  "compute": {"is_comm": False, "status": "ok", "message": "", "timing": None}},
        "candidates": [
            {"index": 0, "path": "a.so", "status": "ok", "message": "", "phase": "", "requirements":
             {"lsa_barrier_count": 16}, "checks": [check], "timing": timing},
            {"index": 1, "path": "b.so", "status": "verify_failed", "message": "bad", "phase": "verify seed 1",
             "requirements": {}, "checks": [dict(check, passed=False, rel_l2_err=None, n_nan=10)], "timing": None},
        ],
    }


def test_parses_every_field() -> None:
    r = HarnessResult.from_dict(sample())
    assert r.device == "NVIDIA H200" and r.sm_count == 132 and r.world == 2 and r.dims == (8, 8, 8)
    assert r.part_ms("comm") == 2.0 and r.part_ms("compute") is None and r.parts["comm"].is_comm
    a, b = r.candidates
    assert a.ok and a.time_ms == 2.0 and a.timing.per_rank_ms[1] == (2.0, 2.0, 4.0)
    assert a.requirements == {"lsa_barrier_count": 16}
    assert not b.ok and b.time_ms is None and b.checks[0].n_nan == 10
    assert math.isnan(b.checks[0].rel_l2_err)  # JSON null stands for NaN
    assert "NVIDIA H200 x2" in r.environment() and "NCCL 2.28.9" in r.environment()


def test_round_trips_through_dict_and_json() -> None:
    r = HarnessResult.from_dict(sample())
    again = HarnessResult.from_json(json.dumps(r.to_dict()).replace("NaN", "null"))
    assert again.candidates[0] == r.candidates[0]
    assert again.parts == r.parts and again.dims == r.dims and again.device == r.device


@pytest.mark.parametrize("path", [("device",), ("candidates",), ("candidates", 0, "status"),
                                  ("candidates", 1, "checks", 0, "n_bad"), ("parts", "comm", "timing", "spread")])
def test_missing_field_is_named(path: tuple) -> None:
    d = sample()
    target = d
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    with pytest.raises(HarnessResultError, match=f"missing field '.*{path[-1]}'"):
        HarnessResult.from_dict(d)


def test_rejects_unknown_status_schema_and_garbage() -> None:
    d = sample()
    d["candidates"][0]["status"] = "great"
    with pytest.raises(HarnessResultError, match="'great' is not one of"):
        HarnessResult.from_dict(d)
    d = sample()
    d["schema"] = 2
    with pytest.raises(HarnessResultError, match="schema 2"):
        HarnessResult.from_dict(d)
    with pytest.raises(HarnessResultError, match="not valid JSON"):
        HarnessResult.from_json("{\"schema\": 1,")


def test_request_argv_and_deadline() -> None:
    req = HarnessRequest("w.so", ["a.so", "b.so"], dims=(8192, 8192, 8192), world=2, seeds=(3, 4), iters=20,
                         warmup=2, parts=True, timeout_s=30)
    argv = req.argv(Path("/bin/cuco-harness"), Path("/tmp/r.json"))
    assert argv[0] == "/bin/cuco-harness"
    flags = dict(zip(argv[1::2], argv[2::2]))
    assert argv.count("--candidate") == 2 and argv[argv.index("--candidate") + 1] == "a.so"
    assert flags["--dims"] == "8192,8192,8192" and flags["--world"] == "2" and flags["--seeds"] == "3,4"
    assert flags["--iters"] == "20" and flags["--warmup"] == "2" and flags["--parts"] == "1"
    assert flags["--timeout-s"] == "30" and flags["--out"] == "/tmp/r.json" and "--devices" not in flags
    # init + shutdown, two parts, per candidate load/setup/bench/teardown plus one phase per seed.
    assert req.total_timeout_s() == (2 + 2 + 2 * (4 + 2)) * 30
    assert float(flags["--total-timeout-s"]) == req.total_timeout_s()
    assert "--devices" in HarnessRequest("w.so", ["a.so"], dims=(4,), world=2, devices=(1, 0)).argv(Path("h"), Path("o"))
    assert "--delay-comm-us" not in flags  # off unless asked
    delayed = HarnessRequest("w.so", ["a.so"], dims=(4,), world=1, delay_comm_us=2000).argv(Path("h"), Path("o"))
    assert delayed[delayed.index("--delay-comm-us") + 1] == "2000"
    assert "--warm-ms" not in flags
    warm = HarnessRequest("w.so", ["a.so"], dims=(4,), world=1, parts=True, warm_ms=300)
    assert warm.argv(Path("h"), Path("o"))[-2:] == ["--warm-ms", "300"]
    assert warm.total_timeout_s() == attrs.evolve(warm, warm_ms=0).total_timeout_s() + warm.timeout_s


@pytest.mark.parametrize("kwargs, match", [
    (dict(dims=()), "dims"), (dict(dims=(-1,)), "dims"), (dict(dims=(1,) * 9), "dims"), (dict(world=0), "world"),
    (dict(devices=(0,)), "devices"), (dict(iters=0), "iters"), (dict(timeout_s=0), "timeout_s"),
    (dict(candidates=[]), "nothing to run"), (dict(candidates="a.so"), "list of paths"),
    (dict(delay_comm_us=-1), "delay_comm_us"), (dict(delay_comm_us=2e6), "delay_comm_us"),
    (dict(graph_replays=-1), "graph_replays"), (dict(graph_replays=100_001), "graph_replays"),
    (dict(graph_replays=2.5), "graph_replays"), (dict(graph_replays=True), "graph_replays"),
    (dict(warm_ms=-1), "warm_ms"), (dict(warm_ms=61000), "warm_ms"),
    (dict(launches_per_iteration=0), "launches_per_iteration"),
    (dict(launches_per_iteration=1001), "launches_per_iteration"),
    (dict(launches_per_iteration=2.0), "launches_per_iteration"),
    (dict(launches_per_iteration=True), "launches_per_iteration"),
])
def test_request_validation(kwargs: dict, match: str) -> None:
    base = dict(workload_plugin="w.so", candidates=["a.so"], dims=(4,), world=2)
    base.update(kwargs)
    with pytest.raises(HarnessRequestError, match=match):
        HarnessRequest(**base)


def _selftest_binary(name: str, sources: list[str], headers: list[str]) -> Path:
    """A self-test program over harness sources (fixture `name`.cpp + csrc/harness/`sources`), compiled once per
    content into the cache; skips where nvcc or the toolchain is missing."""
    if shutil.which("nvcc") is None and not os.environ.get("CUCO_NVCC"):
        pytest.skip(f"needs nvcc to compile {name}")
    try:
        tc = Toolchain.detect()
    except ToolchainError as exc:
        pytest.skip(f"toolchain incomplete: {exc}")
    h = csrc_dir() / "harness"
    files = [FIXTURES / f"{name}.cpp", *(h / f for f in sources)]
    key = content_hash(*(p.read_bytes() for p in [*files, *(h / f for f in headers)]), tc.fingerprint())
    out = cache_dir() / "selftest" / key / name
    if not out.exists():
        res = tc.compile(files, out, shared=False, include_dirs=[h, include_dir()])
        assert res.ok, res.log
    return out


@pytest.fixture(scope="module")
def selftest() -> Path:
    return _selftest_binary("harness_selftest", ["timing.cpp", "json.cpp"], ["timing.h", "json.h"])


def run_selftest(binary: Path, ranks: list[list[float]], text: str) -> dict:
    stdin = "".join(" ".join(repr(float(x)) for x in xs) + "\n" for xs in ranks) + f"STR {text}\n"
    proc = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(proc.stdout)


def test_statistics_match_numpy(selftest: Path) -> None:
    rng = np.random.default_rng(0)
    ranks = [list(rng.uniform(1.0, 2.0, 31)), list(rng.uniform(1.5, 2.5, 30)), [3.0]]
    out = run_selftest(selftest, ranks, "plain")
    for r, xs in enumerate(ranks):
        assert out["per_rank_median_ms"][r] == pytest.approx(np.median(xs), rel=1e-7)
        assert out["per_rank_p10_ms"][r] == pytest.approx(np.percentile(xs, 10), rel=1e-7)
        assert out["per_rank_p90_ms"][r] == pytest.approx(np.percentile(xs, 90), rel=1e-7)
        assert out["per_rank_min_ms"][r] == pytest.approx(min(xs), rel=1e-7)
    medians = [np.median(xs) for xs in ranks]
    assert out["max_rank"] == int(np.argmax(medians)) == 2
    assert out["max_median_ms"] == pytest.approx(max(medians))
    assert out["min_ms"] == pytest.approx(min(min(xs) for xs in ranks))
    assert out["spread"] == 0.0  # a single sample has no spread
    out = run_selftest(selftest, ranks[:2], "x")
    xs = ranks[int(np.argmax(medians[:2]))]
    assert out["spread"] == pytest.approx((np.percentile(xs, 90) - np.percentile(xs, 10)) / np.median(xs), rel=1e-7)


def test_json_writer_escapes_and_nulls(selftest: Path) -> None:
    out = run_selftest(selftest, [[1.0]], 'quote " back \\ caf\u00e9 <tag>')
    assert out["text"] == 'quote " back \\ caf\u00c3\u00a9 <tag>\x01\t"\\'  # bytes >= 0x80 are escaped one by one
    assert out["nan"] is None and out["empty"] == [] and out["nested"] == {"a": [1, True, None]}


# ---- the runner, with a test double of the harness binary -----------------------------------------------

@pytest.fixture
def fake_binary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "fake-cuco-harness"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FIXTURES / "fake_harness.py"}" "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("CUCO_FAKE_HARNESS_LOG", str(tmp_path / "calls.log"))
    return script


def calls(tmp_path: Path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "calls.log").read_text().splitlines()]


def test_runner_reruns_what_a_hang_or_crash_left_unreached(fake_binary: Path, tmp_path: Path) -> None:
    req = HarnessRequest("w.so", ["ok1.so", "die.so", "ok2.so", "hang.so", "ok3.so"], dims=(4,), world=2)
    res = run_harness(req, binary=fake_binary, env=dict(os.environ))
    assert [c.status for c in res.candidates] == ["ok", "crash", "ok", "hang", "ok"]
    assert [Path(c.path).name for c in res.candidates] == ["ok1.so", "die.so", "ok2.so", "hang.so", "ok3.so"]
    crash = res.candidates[1]
    assert "SIGSEGV" in crash.message and "segfault in candidate host code" in crash.message
    assert crash.phase == "verify seed 1"
    assert calls(tmp_path) == [["ok1.so", "die.so", "ok2.so", "hang.so", "ok3.so"], ["ok2.so", "hang.so", "ok3.so"],
                               ["ok3.so"]]
    assert res.processes == 3 and res.status == "ok" and "process 1: crash" in res.message


def test_runner_kills_a_stalled_harness(fake_binary: Path, tmp_path: Path) -> None:
    req = HarnessRequest("w.so", ["stall.so", "ok.so"], dims=(4,), world=2, timeout_s=0.05)
    res = run_harness(req, binary=fake_binary, env=dict(os.environ), outer_margin_s=1.0)
    assert [c.status for c in res.candidates] == ["hang", "ok"]
    assert "killed by the outer timeout" in res.candidates[0].message


def test_a_process_without_result_is_an_error_not_a_retry(tmp_path: Path) -> None:
    req = HarnessRequest("w.so", ["a.so", "b.so"], dims=(4,), world=2)
    r = interpret(req, tmp_path / "none.json", ProcessOutcome(127, "", "error while loading shared libraries", 0.1, False))
    assert r.status == "error" and "exit code 127" in r.message and "loading shared" in r.message
    assert [c.status for c in r.candidates] == ["not_run", "not_run"]
    assert all(c.graph is None for c in r.candidates)
    graphed = interpret(attrs.evolve(req, graph_replays=20), tmp_path / "none.json",
                        ProcessOutcome(127, "", "error while loading shared libraries", 0.1, False))
    assert all(c.graph.status == "not_run" and "exit code 127" in c.graph.reason for c in graphed.candidates)


def test_runner_stops_when_a_process_makes_no_progress(tmp_path: Path) -> None:
    # A binary that cannot start: one process, every candidate not_run with the reason.
    req = HarnessRequest("w.so", ["a.so", "b.so"], dims=(4,), world=2)
    res = run_harness(req, binary=Path("/bin/false"), env=dict(os.environ))
    assert res.processes == 1 and res.status == "error"
    assert [c.status for c in res.candidates] == ["not_run", "not_run"] and "exit code 1" in res.message


def test_gpu_count_honours_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_count() == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert gpu_count() == 0


def test_a_zero_dim_is_a_flag_not_an_error() -> None:
    """attention_cp's non-causal shapes pass CAUSAL = 0 as their last dim."""
    req = HarnessRequest("w.so", ["a.so"], dims=(8192, 32, 8, 128, 0), world=1)
    assert req.argv(Path("h"), Path("o"))[req.argv(Path("h"), Path("o")).index("--dims") + 1] == "8192,32,8,128,0"


def test_a_candidates_figures_carry_the_driver_release_not_only_the_cuda_version_it_supports() -> None:
    from cuco import workloads
    from cuco.evaluate.cascade import Evaluator
    from cuco.evaluate.executor import Executor

    evaluator = Evaluator(workloads.get("gemm_allgather"), world=2, executor=Executor(world=2, devices=[]))
    context = evaluator._context(HarnessResult.from_dict(sample()), None, None)
    assert context["driver_release"] == "580.159.04" and context["driver_version"] == "13.0"


# --- CUDA-graph replay (--graph-replays) -------------------------------------------------------------------------


def test_request_passes_graph_replays_and_counts_its_phase() -> None:
    base = HarnessRequest("w.so", ["a.so", "b.so"], dims=(4,), world=2, timeout_s=10)
    assert "--graph-replays" not in base.argv(Path("h"), Path("o"))  # off unless asked
    req = HarnessRequest("w.so", ["a.so", "b.so"], dims=(4,), world=2, timeout_s=10, graph_replays=20)
    argv = req.argv(Path("h"), Path("o"))
    assert argv[argv.index("--graph-replays") + 1] == "20"
    assert req.total_timeout_s() == base.total_timeout_s() + 2 * 10  # one more phase per candidate
    assert float(argv[argv.index("--total-timeout-s") + 1]) == req.total_timeout_s()


def test_graph_records_parse_summarise_and_round_trip() -> None:
    from cuco.harness import GraphRun

    r = HarnessResult.from_file(FIXTURES / "graph_result.json")
    passed, failed, uncapturable, unverified = r.candidates
    assert passed.graph == GraphRun(replays=20, status="passed") and passed.graph.passed
    assert failed.ok and not failed.graph.passed  # the candidate's status is its verify/bench result
    assert (failed.graph.status, failed.graph.failed_replay, failed.graph.failed_seed) == ("failed", 1, 2000007)
    assert "graph failed at replay 1 of 20 (seed 2000007)" in failed.summary() and failed.summary().startswith("ok ")
    assert uncapturable.graph.status == "not_capturable" and uncapturable.graph.failed_replay is None
    assert "cudaErrorStreamCaptureInvalidated" in uncapturable.summary()
    assert unverified.graph.status == "not_run" and "verify_failed" in unverified.summary()
    assert passed.summary() == "ok 0.0510 ms; graph passed (20 replays)"
    again = HarnessResult.from_json(json.dumps(r.to_dict()))
    assert again.candidates == r.candidates
    # Results written without the option (and older results) have no graph record.
    assert HarnessResult.from_dict(sample()).candidates[0].graph is None
    assert "graph" not in HarnessResult.from_dict(sample()).candidates[0].summary()


def test_a_bad_graph_record_is_named() -> None:
    d = json.loads((FIXTURES / "graph_result.json").read_text())
    d["candidates"][0]["graph"]["status"] = "fine"
    with pytest.raises(HarnessResultError, match="'fine' is not one of"):
        HarnessResult.from_dict(d)
    del d["candidates"][1]["graph"]["replays"]
    d["candidates"][0]["graph"]["status"] = "passed"
    with pytest.raises(HarnessResultError, match=r"missing field 'candidates\[1\].graph.replays'"):
        HarnessResult.from_dict(d)


def test_runner_keeps_graph_outcomes_and_a_death_in_the_graph_phase_is_the_graphs(fake_binary: Path,
                                                                                    tmp_path: Path) -> None:
    req = HarnessRequest("w.so", ["ok1.so", "okgraphfail.so", "okgraphdie.so", "ok2.so"], dims=(4,), world=2,
                         graph_replays=20)
    res = run_harness(req, binary=fake_binary, env=dict(os.environ))
    assert [c.status for c in res.candidates] == ["ok", "ok", "ok", "ok"]
    assert [c.graph.status for c in res.candidates] == ["passed", "failed", "crash", "passed"]
    died = res.candidates[2].graph
    assert died.failed_replay == 1 and "SIGSEGV" in died.reason and "segfault in the graph phase" in died.reason
    assert res.candidates[1].graph.failed_replay == 1 and res.processes == 2
    plain = run_harness(attrs.evolve(req, graph_replays=0, candidates=["ok1.so"]), binary=fake_binary,
                        env=dict(os.environ))
    assert plain.candidates[0].graph is None


@pytest.fixture(scope="module")
def report_selftest() -> Path:
    return _selftest_binary("report_selftest", ["report.cpp", "json.cpp", "timing.cpp", "options.cpp", "watchdog.cpp"],
                            ["report.h", "json.h", "timing.h", "options.h", "watchdog.h"])


def _report(binary: Path, mode: str, tmp_path: Path, *extra: str, n: int = 4) -> subprocess.CompletedProcess:
    args = [str(binary), mode, "--workload", "w.so", "--dims", "4", "--world", "2", "--out", str(tmp_path / "r.json")]
    for i in range(n):
        args += ["--candidate", f"c{i}.so"]
    return subprocess.run(args + list(extra), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value, message", [("-1", "--graph-replays must be between 0 (off) and 100000"),
                                            ("100001", "--graph-replays must be between 0 (off) and 100000"),
                                            ("x", "--graph-replays takes an integer, got 'x'")])
def test_the_harness_command_line_refuses_a_bad_graph_replays(report_selftest: Path, tmp_path: Path, value: str,
                                                              message: str) -> None:
    proc = _report(report_selftest, "finish", tmp_path, "--graph-replays", value)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_the_harness_writes_the_graph_records_python_reads(report_selftest: Path, tmp_path: Path) -> None:
    proc = _report(report_selftest, "finish", tmp_path, "--graph-replays", "20")
    assert proc.returncode == 0, proc.stderr
    written = json.loads((tmp_path / "r.json").read_text())
    recorded = json.loads((FIXTURES / "graph_result.json").read_text())
    for w, f in zip(written["candidates"], recorded["candidates"]):  # the fixture has the writer's schema
        assert list(w["graph"]) == list(f["graph"]) and w["graph"]["status"] == f["graph"]["status"]
    r = HarnessResult.from_dict(written)
    assert [c.graph.status for c in r.candidates] == ["passed", "failed", "not_capturable", "not_run"]
    assert r.candidates[1].graph.failed_replay == 1 and r.candidates[1].graph.failed_seed == 2000007
    assert [c.status for c in r.candidates] == ["ok", "ok", "ok", "verify_failed"]
    assert _report(report_selftest, "finish", tmp_path).returncode == 0  # off: no graph record at all
    assert all(c["graph"] is None for c in json.loads((tmp_path / "r.json").read_text())["candidates"])
    assert (2 + 4 * (4 + 2 + 1)) * 120 == HarnessRequest("w.so", ["a"] * 4, dims=(4,), graph_replays=20,
                                                         timeout_s=120).total_timeout_s()


def test_a_hang_in_the_graph_phase_is_the_graphs_not_the_candidates(report_selftest: Path, tmp_path: Path) -> None:
    proc = _report(report_selftest, "hang", tmp_path, "--graph-replays", "20", n=6)
    assert proc.returncode == 3, proc.stderr
    r = HarnessResult.from_file(tmp_path / "r.json")
    assert r.status == "hang" and "c4.so hang in graph" in r.message
    hung = r.candidates[4]
    assert hung.status == "ok" and hung.graph.status == "hang" and hung.graph.failed_replay == 2
    assert "graph hang at replay 2 of 20 (seed 3000009)" in hung.summary()
    assert r.candidates[5].status == "not_run" and r.candidates[5].graph.status == "not_run"
    assert "not reached: c4.so hang in graph" in r.candidates[5].graph.reason


def test_a_hang_names_each_ranks_last_step(report_selftest: Path, tmp_path: Path) -> None:
    """A hang's message says where each rank stood: one waiting for its GPU, one stopped by its own failed launch
    (a bench that waited before agreeing turned such an error into a hang with no reason)."""
    proc = _report(report_selftest, "watchdog", tmp_path, n=5)
    assert proc.returncode == 3, proc.stderr
    r = HarnessResult.from_file(tmp_path / "r.json")
    hung = r.candidates[4]
    assert hung.status == "hang", hung
    assert ("rank 0: bench iteration 7, waiting for its GPU; rank 1: bench iteration 7, the launch entry point "
            "returned 3") in hung.message, hung.message


def test_a_hang_names_a_rank_that_never_reached_the_phase(report_selftest: Path, tmp_path: Path) -> None:
    """The recorder entering a phase keeps its peers' last steps: a rank still in the setup before it is named
    there (clearing them on entry left a W = 2 hang in bench naming no rank at all)."""
    proc = _report(report_selftest, "watchdog-behind", tmp_path, n=5)
    assert proc.returncode == 3, proc.stderr
    hung = HarnessResult.from_file(tmp_path / "r.json").candidates[4]
    assert hung.status == "hang", hung
    assert ("rank 0: candidate 4 bench iteration 0, at host agreement 1; rank 1: candidate 4 setup, in the "
            "candidate's setup, then waiting for its GPU") in hung.message, hung.message


def test_launches_per_iteration_crosses_the_command_line_and_comes_back_in_the_timing(report_selftest: Path,
                                                                                    tmp_path: Path) -> None:
    """Off (1) unless asked; asked, the flag reaches the harness and its timing says how many launches each
    iteration held, which Python reads back; out of range, the harness refuses it by name."""
    base = HarnessRequest("w.so", ["a.so"], dims=(4,), world=2)
    assert "--launches-per-iteration" not in base.argv(Path("h"), Path("o"))
    asked = attrs.evolve(base, launches_per_iteration=20).argv(Path("h"), Path("o"))
    assert asked[asked.index("--launches-per-iteration") + 1] == "20"
    proc = _report(report_selftest, "finish", tmp_path, "--launches-per-iteration", "20")
    assert proc.returncode == 0, proc.stderr
    written = HarnessResult.from_dict(json.loads((tmp_path / "r.json").read_text()))
    timed = [c.timing for c in written.candidates if c.timing is not None]
    assert timed and all(t.launches_per_iteration == 20 for t in timed)
    assert _report(report_selftest, "finish", tmp_path).returncode == 0
    timed = [c.timing for c in HarnessResult.from_dict(json.loads((tmp_path / "r.json").read_text())).candidates
             if c.timing is not None]
    assert all(t.launches_per_iteration == 1 for t in timed)
    for value in ("0", "1001", "x"):
        bad = _report(report_selftest, "finish", tmp_path, "--launches-per-iteration", value)
        assert bad.returncode == 2 and "--launches-per-iteration" in bad.stderr, bad.stderr
