"""GPU tests of the harness (need >= 2 GPUs): every fixture candidate gets the status it deserves, hangs
and crashes are contained (and the next process finds the GPUs usable), timings repeat and agree with an
independent timing loop."""

from __future__ import annotations

import importlib.util
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from cuco.harness import HarnessRequest, HarnessResult, build_shared, gpu_count, harness_binary, run_harness
from cuco.toolchain import Toolchain

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "harness"
NAMES = ["copy_workload", "good_lsa", "nccl_allgather", "deadlock", "wrong_values", "prints_pass",
         "illegal_address", "needs_gin", "missing_launch", "host_epoch_flag", "syncs_in_launch", "fails_on_one_rank"]
SMALL = (1 << 20) + 3  # odd: exercises every candidate's tail path
BIG = 32 << 20         # 64 MiB of bf16 per rank


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    gpus = gpu_count()
    if gpus < 2:
        pytest.skip(f"needs 2 GPUs, found {gpus}")
    tc = Toolchain.detect()
    with ThreadPoolExecutor(8) as pool:
        binary = pool.submit(harness_binary, tc)
        sos = {n: pool.submit(build_shared, FIXTURES / f"{n}.cu", ("cublasLt",) if n == "copy_workload" else (),
                              toolchain=tc) for n in NAMES}
        out = {n: f.result() for n, f in sos.items()}
        out["harness"] = binary.result()
    return out


def request(built: dict[str, Path], names: list[str], **kw) -> HarnessRequest:
    kw.setdefault("dims", (SMALL,))
    kw.setdefault("iters", 10)
    kw.setdefault("warmup", 2)
    kw.setdefault("timeout_s", 60)
    return HarnessRequest(built["copy_workload"], [built[n] for n in names], world=2, **kw)


def run(built: dict[str, Path], req: HarnessRequest) -> HarnessResult:
    return run_harness(req, binary=built["harness"])


def test_each_fixture_gets_its_status(built: dict[str, Path]) -> None:
    names = ["good_lsa", "nccl_allgather", "wrong_values", "prints_pass", "missing_launch"]
    res = run(built, request(built, names, parts=True))
    got = {n: c for n, c in zip(names, res.candidates)}
    assert [c.status for c in res.candidates] == ["ok", "ok", "verify_failed", "verify_failed", "error"], \
        [(c.status, c.message) for c in res.candidates]
    assert res.status == "ok" and res.processes == 1 and res.world == 2
    assert res.device and res.sm_count > 0 and res.nccl_version.startswith("2.") and res.date
    if Path("/proc/driver/nvidia/version").exists():
        assert res.driver_release.replace(".", "").isdigit(), res.driver_release

    for n in ("good_lsa", "nccl_allgather"):
        c = got[n]
        assert [(k.seed, k.rank) for k in c.checks] == [(1, 0), (1, 1), (2, 0), (2, 1)]
        assert all(k.passed and k.n_checked == 2 * SMALL and k.n_bad == 0 and k.n_nan == 0 for k in c.checks)
        t = c.timing
        assert len(t.per_rank_ms) == 2 and all(len(xs) == 10 for xs in t.per_rank_ms)
        medians = [float(np.median(xs)) for xs in t.per_rank_ms]
        assert t.per_rank_median_ms == pytest.approx(medians, rel=1e-6)
        assert t.max_median_ms == pytest.approx(max(medians), rel=1e-6) and t.min_ms > 0
    assert got["good_lsa"].requirements["lsa_barrier_count"] == 16

    wrong = got["wrong_values"]
    assert all(k.n_bad == 1 and k.n_nan == 0 and not k.passed and k.max_abs_err > 0 for k in wrong.checks)
    assert wrong.timing is None and "1 of" in wrong.message

    fake = got["prints_pass"]
    assert all(k.n_nan == k.n_checked == 2 * SMALL for k in fake.checks)  # outputs stayed poisoned
    assert fake.timing is None

    assert "cuco_candidate_launch" in got["missing_launch"].message and got["missing_launch"].phase == "load"

    assert set(res.parts) == {"comm", "compute"}
    assert res.parts["comm"].is_comm and not res.parts["compute"].is_comm
    assert all(p.status == "ok" and p.timing and p.timing.max_median_ms > 0 for p in res.parts.values())


def test_deadlock_is_reported_as_hang_and_the_next_process_succeeds(built: dict[str, Path]) -> None:
    start = time.monotonic()
    res = run(built, request(built, ["deadlock", "good_lsa"], timeout_s=10, bench=False))
    wall = time.monotonic() - start
    hang, good = res.candidates
    assert hang.status == "hang" and hang.phase == "verify seed 1", (hang.status, hang.message)
    assert "deadline" in hang.message
    # The fresh process after the hang initialised NCCL, ran and verified on the same GPUs.
    assert good.status == "ok" and all(k.passed for k in good.checks)
    assert res.processes == 2
    assert wall < 10 + 60, f"a hang with a 10 s phase deadline took {wall:.0f} s to contain"


def test_a_launch_that_fails_on_one_rank_in_bench_is_that_error_not_a_hang(built: dict[str, Path]) -> None:
    """Rank 1 returns an error in the bench phase while rank 0's AllGather waits for it: every rank agrees on the
    launch before any waits, so the candidate is `error` with rank 1's reason (its peer's stuck kernel may still
    end the process in teardown, said after it), and the next candidate runs in a fresh process."""
    res = run(built, request(built, ["fails_on_one_rank", "good_lsa"], timeout_s=15))
    bad, good = res.candidates
    assert bad.status == "error" and "returned 7" in bad.message, (bad.status, bad.message)
    assert good.status == "ok", (good.status, good.message)


def test_illegal_address_is_a_crash_and_the_rest_still_run(built: dict[str, Path]) -> None:
    res = run(built, request(built, ["illegal_address", "nccl_allgather"], bench=False))
    crash, ok = res.candidates
    assert crash.status == "crash" and "cudaErrorIllegalAddress" in crash.message, crash.message
    assert ok.status == "ok" and res.processes == 2


def test_gin_candidate_is_unsupported_without_a_nic(built: dict[str, Path]) -> None:
    res = run(built, request(built, ["needs_gin", "nccl_allgather"], bench=False))
    gin, ok = res.candidates
    ib = Path("/sys/class/infiniband")
    if ib.is_dir() and any(ib.iterdir()):
        # An RDMA NIC is present: GIN may work, and then the candidate verifies.
        assert gin.status in ("unsupported", "ok"), (gin.status, gin.message)
    else:
        # No RDMA NIC: GIN must be refused cleanly, quickly, and the next candidate still runs.
        assert gin.status == "unsupported", (gin.status, gin.message)
        assert gin.phase == "setup" and ("GIN" in gin.message or "ncclDevCommCreate" in gin.message)
    assert ok.status == "ok"


def test_graph_replay_tells_graph_safe_candidates_from_host_epoch_and_uncapturable_ones(built: dict[str, Path]) -> None:
    """Capture once, replay with fresh inputs and a delayed writer: a candidate whose flag epoch comes from the host's
    iteration counter (frozen in the graph) verifies launch by launch and fails from replay 1; one that synchronises
    inside its launch is not capturable, and the streams leave capture mode for the candidates after it."""
    names = ["syncs_in_launch", "host_epoch_flag", "good_lsa", "nccl_allgather", "wrong_values"]
    res = run(built, request(built, names, graph_replays=5, delay_comm_us=2000))
    got = dict(zip(names, res.candidates))
    assert [c.status for c in res.candidates] == ["ok", "ok", "ok", "ok", "verify_failed"], \
        [(c.status, c.message) for c in res.candidates]
    assert res.processes == 1 and all(c.graph is not None and c.graph.replays == 5 for c in res.candidates)
    uncapturable = got["syncs_in_launch"].graph
    assert uncapturable.status == "not_capturable" and "cudaErrorStreamCapture" in uncapturable.reason, uncapturable
    frozen = got["host_epoch_flag"].graph
    assert frozen.status == "failed" and frozen.failed_replay == 1, frozen
    assert "elements wrong" in frozen.reason and "graph failed at replay 1" in got["host_epoch_flag"].summary()
    for n in ("good_lsa", "nccl_allgather"):
        assert got[n].graph.status == "passed", (n, got[n].graph)
    assert got["wrong_values"].graph.status == "not_run" and "verify_failed" in got["wrong_values"].graph.reason


@pytest.fixture(scope="module")
def big_runs(built: dict[str, Path]) -> list[HarnessResult]:
    req = request(built, ["nccl_allgather", "good_lsa"], dims=(BIG,), seeds=(1,), iters=30, warmup=5)
    return [run(built, req) for _ in range(2)]


def test_repeated_runs_agree_within_3_percent(big_runs: list[HarnessResult]) -> None:
    """The harness times one LSA candidate alike in two fresh processes. NCCL's own AllGather is not held to it:
    between processes it moved 3.3 % and 4.3 % here (`benchmarks/results/w2_eager_connect/`, `gpu_tests_b.log`)
    and up to 17 % over the 7 processes of a figure of record (`gemm_allgather_w2.json`, `comm_ms`), NCCL's
    variation, not the harness's; the next test checks the harness's NCCL timing against an independent loop."""
    for r in big_runs:
        assert all(c.ok for c in r.candidates), [(c.path, c.message) for c in r.candidates if not c.ok]
    a, b = (r.candidates[1] for r in big_runs)  # good_lsa
    assert abs(a.time_ms - b.time_ms) / min(a.time_ms, b.time_ms) < 0.03, (a.path, a.time_ms, b.time_ms)


def test_harness_timing_matches_an_independent_nccl_loop(big_runs: list[HarnessResult]) -> None:
    spec = importlib.util.spec_from_file_location("harness_timing", REPO / "benchmarks" / "harness_timing.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    # the independent loop is a measurement too: one of its runs on the 4-GPU machine had per-rank medians of 0.407
    # and 0.387 ms against its own back-to-back 0.296 ms (the harness: 0.306), so its figure is the median of three
    # runs, each its own process
    loops = [bench.independent_allgather_ms(BIG * 2, world=2, warmup=5, iters=30) for _ in range(3)]
    loop_ms = float(np.median([loop["max_median_ms"] for loop in loops]))
    harness_ms = float(np.mean([r.candidates[0].time_ms for r in big_runs]))
    assert abs(harness_ms - loop_ms) / loop_ms < 0.05, (harness_ms, loops)
