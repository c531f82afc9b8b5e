"""GPU tests of the harness's process-per-rank mode on min(2, GPUs) ranks (W = 1 on one GPU): the same LSA
candidate gets the same verdict and the same time (within noise) in thread and process mode, and a rank that
hangs takes its group down within the phase deadline, after which a fresh group runs."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuco.harness import HarnessRequest, build_shared, gpu_count, harness_binary, run_harness
from cuco.toolchain import Toolchain

pytestmark = pytest.mark.gpu

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "harness"
SMALL = (1 << 20) + 3


@pytest.fixture(scope="module")
def built() -> dict[str, Path]:
    if gpu_count() < 1:
        pytest.skip("needs a GPU")
    tc = Toolchain.detect()
    names = ["copy_workload", "good_lsa", "deadlock"]
    with ThreadPoolExecutor(4) as pool:
        binary = pool.submit(harness_binary, tc)
        sos = {n: pool.submit(build_shared, FIXTURES / f"{n}.cu", ("cublasLt",) if n == "copy_workload" else (),
                              toolchain=tc) for n in names}
        out = {n: f.result() for n, f in sos.items()}
    out["harness"] = binary.result()
    return out


def _req(built, names, mode, **kw) -> HarnessRequest:
    kw.setdefault("dims", (SMALL,))
    kw.setdefault("timeout_s", 60)
    return HarnessRequest(built["copy_workload"], [built[n] for n in names], world=min(2, gpu_count()), mode=mode,
                          **kw)


def test_thread_and_process_mode_agree_on_verdict_and_time(built):
    big = (32 << 20,)  # 64 MiB per rank: long enough that launch noise is small
    runs = {}
    for mode in ("thread", "process", "thread", "process"):  # interleaved: drift hits both alike
        res = run_harness(_req(built, ["good_lsa"], mode, dims=big, iters=30, warmup=5, delay_comm_us=2000),
                          binary=built["harness"])
        (c,) = res.candidates
        assert res.status == "ok" and c.status == "ok", (mode, res.message, c.message)
        assert len(c.checks) == 2 * res.world and all(k.passed for k in c.checks)  # every rank's checks arrived
        assert c.timing is not None and len(c.timing.per_rank_median_ms) == res.world
        runs.setdefault(mode, []).append(c.timing)
    thread = min(t.max_median_ms for t in runs["thread"])
    process = min(t.max_median_ms for t in runs["process"])
    noise = max(0.05, 3 * max(t.spread for ts in runs.values() for t in ts))
    print(f"thread {thread:.4f} ms, process {process:.4f} ms, allowed relative difference {noise:.3f}")
    assert abs(process - thread) / thread <= noise, (thread, process, noise)


def test_a_hung_rank_takes_the_process_group_down_within_its_deadline(built):
    start = time.monotonic()
    res = run_harness(_req(built, ["deadlock", "good_lsa"], "process", timeout_s=10, bench=False),
                      binary=built["harness"])
    wall = time.monotonic() - start
    hang, good = res.candidates
    assert hang.status == "hang", (hang.status, hang.message)
    assert good.status == "ok" and res.processes == 2, (good.status, good.message)
    assert wall < 10 + 60, f"a hang with a 10 s phase deadline took {wall:.0f} s to contain"
