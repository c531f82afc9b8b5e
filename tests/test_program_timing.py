"""Steady-state timing of a user's program, the same for the original and every rewrite: each region repeats in
its process (observe.h, CUCO_REGION_REPEATS), the first instance is reported apart as cold, and the devices waited
on follow the launch model read from the code (one process driving every GPU, a thread per GPU, a process per
GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuco.fastpath.analyze import analyze
from cuco.program.observation import Observation
from cuco.program.source import HostProgram, launch_model

KERNEL = "#include <nccl.h>\n#include <thread>\n__global__ void k(float* x) { x[threadIdx.x] += 1; }\n"
REGION = """  cudaSetDevice(r0);
  k<<<1, 256>>>(buf);
  ncclAllReduce(buf, buf, 256, ncclFloat, ncclSum, comm, 0);
  float h[256];
  cudaMemcpy(h, buf, 1024, cudaMemcpyDeviceToHost);
"""
SNIPPETS = {
    "single-process": """int main() {
  int n = 2, devs[2] = {0, 1}; ncclComm_t comms[2];
  ncclCommInitAll(comms, n, devs);
  ncclComm_t comm = comms[0]; int r0 = 0; float* buf; cudaMalloc(&buf, 1024);
""" + REGION + "  return 0;\n}\n",
    # one thread creating every rank: ncclCommInitRank in a loop inside an NCCL group
    "single-process (grouped ncclCommInitRank)": """int main() {
  int n = 2; ncclUniqueId id; ncclGetUniqueId(&id); ncclComm_t comms[2];
  ncclGroupStart();
  for (int r = 0; r < n; ++r) { cudaSetDevice(r); ncclCommInitRank(&comms[r], n, id, r); }
  ncclGroupEnd();
  ncclComm_t comm = comms[0]; int r0 = 0; float* buf; cudaMalloc(&buf, 1024);
""" + REGION + "  return 0;\n}\n",
    "thread-per-gpu": """void work(int r0, int n, ncclUniqueId id) {
  cudaSetDevice(r0); ncclComm_t comm; ncclCommInitRank(&comm, n, id, r0);
  float* buf; cudaMalloc(&buf, 1024);
""" + REGION + """}
int main() {
  ncclUniqueId id; ncclGetUniqueId(&id);
  std::thread a(work, 0, 2, id), b(work, 1, 2, id); a.join(); b.join(); return 0;
}
""",
    "process-per-gpu": """int main() {
  int r0 = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE")); ncclUniqueId id;
  read_id_from_file(&id);
  ncclComm_t comm; ncclCommInitRank(&comm, n, id, r0); float* buf; cudaMalloc(&buf, 1024);
""" + REGION + "  return 0;\n}\n",
}


@pytest.mark.parametrize("label", list(SNIPPETS))
def test_the_launch_model_is_read_from_the_code_and_sets_the_devices_a_region_waits_on(label):
    text = KERNEL + SNIPPETS[label]
    expected = label.split(" ")[0]
    assert launch_model(analyze(text, "p.cu")) == expected
    observed = HostProgram.from_text(text, Path("p.cu")).observed
    every_device = 1 if expected == "single-process" else 0
    assert f"cuco_region_begin(0, {every_device});" in observed
    assert f"if (cuco_region_end(0, {every_device})) goto cuco_rep_0;" in observed


def test_the_region_repeats_by_jumping_back_so_its_declarations_stay_in_scope():
    text = KERNEL + SNIPPETS["process-per-gpu"]
    lines = HostProgram.from_text(text, Path("p.cu")).observed.splitlines()
    begin = next(i for i, ln in enumerate(lines) if "cuco_region_begin(" in ln)
    end = next(i for i, ln in enumerate(lines) if "cuco_region_end(" in ln)
    assert lines[begin].strip().startswith("cuco_rep_0: ") and "goto cuco_rep_0;" in lines[end]
    assert not any(ln.strip() in ("{", "}") for ln in lines[begin:end + 1])   # no new block around the range


RAII_SCOPE = KERNEL + """struct Buf {
  explicit Buf(int n) { cudaMalloc(&p, n * sizeof(float)); }
  ~Buf() { cudaFree(p); }
  float* data() { return p; }
  float* p = nullptr;
};
static void step(Buf& b, cudaStream_t s) { k<<<1, 256, 0, s>>>(b.data()); }
int main() {
  int r0 = atoi(getenv("RANK")), n = atoi(getenv("WORLD_SIZE")); ncclUniqueId id;
  read_id_from_file(&id);
  ncclComm_t comm; ncclCommInitRank(&comm, n, id, r0); cudaStream_t s; cudaStreamCreate(&s);
  {
    Buf grad(256);
    step(grad, s);
    ncclAllReduce(grad.data(), grad.data(), 256, ncclFloat, ncclSum, comm, s);
    k<<<1, 256, 0, s>>>(grad.data());
    float h[256];
    cudaMemcpyAsync(h, grad.data(), 1024, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
  }
  return 0;
}
"""


def test_a_region_inside_an_raii_scope_times_the_device_work_only():
    """Collectives in a bare { } block whose objects allocate, and which reads back and waits: the region lies inside
    the block, from the helper that launches the feeding kernel to the consuming kernel, so no instance times the
    objects' allocation and free (for a rewrite: a symmetric allocation and window registration each time) or the
    read-back."""
    lines = HostProgram.from_text(RAII_SCOPE, Path("p.cu")).observed.splitlines()
    begin = next(i for i, ln in enumerate(lines) if "cuco_region_begin(" in ln)
    end = next(i for i, ln in enumerate(lines) if "cuco_region_end(" in ln)
    timed = [ln.strip() for ln in lines[begin + 1:end]]
    assert timed == ["step(grad, s);", "ncclAllReduce(grad.data(), grad.data(), 256, ncclFloat, ncclSum, comm, s);",
                     "k<<<1, 256, 0, s>>>(grad.data());"], timed


def _obs(samples: dict[int, list[float]]) -> Observation:
    """Regions of site 0: device -> its instances' times, in order."""
    return Observation({}, tuple((0, dev, i, ms) for dev, times in samples.items() for i, ms in enumerate(times)))


def test_the_cold_first_instance_is_reported_apart_from_the_steady_state():
    # the first instance pays NCCL's lazy connection: 40 ms, then 2 ms a pass; the slowest rank counts
    obs = _obs({0: [40.0, 2.0, 2.1, 1.9, 2.0], 1: [38.0, 2.2, 2.3, 2.2, 2.4]})
    assert obs.cold_ms() == pytest.approx(40.0)
    assert obs.region_ms() == pytest.approx(2.25)
    assert Observation({}, ()).cold_ms() is None


def test_unit_bench_with_a_fake_launcher_reports_cold_and_steady_times_of_both_sides(tmp_path):
    """A unit test with a test double for the observed runs: the figures the timed rounds make of observations."""
    from doubles import ScriptedLauncher

    from cuco.candidate import Candidate, LevelResult
    from cuco.evaluate.batch import Batch
    from cuco.evaluate.executor import DeviceGroup
    from cuco.program import evaluator as E

    corpus = Path(__file__).parent / "fixtures" / "host_programs"
    original, rewrite = tmp_path / "original", tmp_path / "rewrite"
    launcher = ScriptedLauncher({original: _obs({0: [50.0, 4.0, 4.0], 1: [49.0, 4.2, 4.1]}),
                                 rewrite: _obs({0: [3.0, 2.0, 2.0], 1: [3.1, 2.1, 2.0]})})
    ev = E.ProgramEvaluator(HostProgram.load(corpus / "rs_grad_shard.cu"), world=2, timed_runs=3, work_dir=tmp_path,
                            launcher=launcher)
    reference = _obs({0: [1.0]})
    ev._reference = (original, reference)
    batch = Batch([Candidate(code="x", workload="p").with_result(LevelResult("verify", True))])
    [cid] = batch.ids
    ev._bench(batch, [cid], {cid: rewrite}, reference, DeviceGroup(0, (0, 1), ("0", "1")))
    [out] = batch.candidates()
    m = out.metrics
    assert m["host_ms"] == pytest.approx(4.15) and m["cold_ms"] == pytest.approx(50.0)
    assert m["time_ms"] == pytest.approx(2.05) and m["cold_time_ms"] == pytest.approx(3.1)
    assert m["speedup"] == pytest.approx(4.15 / 2.05)
    assert out.results["bench"].data["cold_runs_ms"] == [pytest.approx(3.1)] * 3
    assert launcher.runs == [original, rewrite] * 3   # the original in every round, beside the rewrite


class StaleUnlessSingleLauncher:
    """A unit-test double of the program harness's runs, for a rewrite that never waits for its data: run with
    delayed arrival and one instance of each region, its read-back is stale; with repeated regions, the earlier
    instances left the same values in place and the last instance's read-back looks right. The original reads
    back b'ok' either way. `envs` records each run's (binary name, region instances, delayed)."""

    def __init__(self):
        self.envs = []

    def run(self, binary, group, env, timeout_s, work_dir):
        from cuco.program.observation import Observation

        single, delayed = env.get("CUCO_REGION_REPEATS") == "1", "CUCO_DELAY_COMM_US" in env
        self.envs.append((binary.name, env.get("CUCO_REGION_REPEATS"), delayed))
        data = b"stale" if binary.name == "rewrite" and single and delayed else b"ok"
        return Observation({(0, 0): data}, ((0, 0, 0, 5.0), (0, 0, 1, 1.0))), ""


def test_verification_runs_each_region_once_so_a_missing_wait_is_not_hidden_by_earlier_instances(tmp_path):
    from cuco.candidate import Candidate, LevelResult
    from cuco.evaluate.executor import Executor
    from cuco.program import evaluator as E

    corpus = Path(__file__).parent / "fixtures" / "host_programs"
    launcher = StaleUnlessSingleLauncher()
    ev = E.ProgramEvaluator(HostProgram.load(corpus / "rs_grad_shard.cu"), world=1, timed_runs=1,
                            executor=Executor(world=1, devices=["0"]), work_dir=tmp_path, launcher=launcher)
    ev.static_level = lambda c: LevelResult("static", True)
    ev._build = lambda code, name: (tmp_path / ("reference" if name == "reference" else "rewrite"), "")
    [out] = ev.evaluate([Candidate(code="never waits", workload="p")])
    assert out.status == "failed:verify", out.feedback
    delayed = [e for e in launcher.envs if e[2]]
    assert delayed == [("rewrite", "1", True)]
    assert ("reference", "1", False) in launcher.envs   # compared with the original run the same way


class ScriptedRoundsLauncher:
    """A unit-test double of the program harness's runs for re-timing: the original's region takes `host_ms`,
    the rewrite's the next of `rewrite_ms` (warm instances; the first instance is 10x); the rewrite reads back
    `rewrite_bytes`. `runs` records the binary names in order."""

    def __init__(self, host_ms, rewrite_ms, rewrite_bytes=b"ok"):
        self.host_ms, self.rewrite_ms, self.rewrite_bytes, self.runs = host_ms, iter(rewrite_ms), rewrite_bytes, []

    def run(self, binary, group, env, timeout_s, work_dir):
        self.runs.append(binary.name)
        ms, data = (self.host_ms, b"ok") if binary.name == "reference" else (next(self.rewrite_ms), self.rewrite_bytes)
        return Observation({(0, 0): data}, ((0, 0, 0, 10 * ms), (0, 0, 1, ms), (0, 0, 2, ms))), ""


def _retiming(tmp_path, launcher):
    from cuco.evaluate.executor import Executor
    from cuco.program import evaluator as E

    corpus = Path(__file__).parent / "fixtures" / "host_programs"
    ev = E.ProgramEvaluator(HostProgram.load(corpus / "rs_grad_shard.cu"), world=1,
                            executor=Executor(world=1, devices=["0"]), work_dir=tmp_path, launcher=launcher)
    ev._build = lambda code, name: (tmp_path / ("reference" if name == "reference" else "rewrite"), "")
    return ev


def test_a_rewrite_is_retimed_in_interleaved_rounds_until_its_spread_settles(tmp_path):
    launcher = ScriptedRoundsLauncher(4.0, [2.0, 4.4, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])
    got = _retiming(tmp_path, launcher).retime("rewrite", min_runs=3, max_runs=9)
    # the second round is slower than the program's, so the spread stays above 0.03 over any later rounds and the
    # rounds never all agree: the cap ends it
    assert len(got.rounds) == 9 and got.best_ms == 2.0 and got.host_ms == 4.0 and got.speedup == 2.0
    assert got.to_dict()["record_spread_above_limit"] and got.to_dict()["record_cold_ms"] == 40.0
    assert launcher.runs[2:] == ["reference", "rewrite"] * 9   # after the reference's two checking runs


def test_retiming_a_rewrite_that_reads_back_other_bytes_is_an_error(tmp_path):
    from cuco.program.source import ProgramError

    ev = _retiming(tmp_path, ScriptedRoundsLauncher(4.0, [2.0] * 3, rewrite_bytes=b"no"))
    with pytest.raises(ProgramError, match="read back other bytes"):
        ev.retime("rewrite")


class TimeoutRecordingLauncher(ScriptedRoundsLauncher):
    """The re-timing double that also records the time limit each run was given, by binary name."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.limits = []

    def run(self, binary, group, env, timeout_s, work_dir):
        self.limits.append((binary.name, timeout_s))
        return super().run(binary, group, env, timeout_s, work_dir)


def test_a_rewrite_run_is_called_hung_long_before_the_whole_limit_and_the_original_keeps_it(tmp_path):
    from cuco.program import evaluator as E

    launcher = TimeoutRecordingLauncher(4.0, [2.0] * 9)
    ev = _retiming(tmp_path, launcher)
    ev.timeout_s = 120.0
    ev.retime("rewrite")
    # the scripted runs take no time, so the rewrite's limit is the floor; the original's runs keep the evaluator's
    assert {lim for name, lim in launcher.limits if name == "rewrite"} == {E.HANG_FLOOR_S}
    assert {lim for name, lim in launcher.limits if name == "reference"} == {120.0}


@given(wall=st.floats(0, 1e4), ceiling=st.floats(1, 1e4))
def test_the_hang_limit_is_the_original_s_time_times_the_factor_within_the_floor_and_the_ceiling(wall, ceiling):
    from cuco.program.evaluator import HANG_FACTOR, HANG_FLOOR_S, hang_limit_s

    limit = hang_limit_s(wall, ceiling)
    assert limit <= ceiling
    assert limit >= min(HANG_FLOOR_S, ceiling)
    if HANG_FLOOR_S <= HANG_FACTOR * wall <= ceiling:
        assert limit == pytest.approx(HANG_FACTOR * wall)
    assert hang_limit_s(wall * 2, ceiling) >= limit
