"""A user's own program on the CPU: loading and bad input, the observed text, the design points' rewrite, the
comparison of read-backs and the timing of regions, and `cuco run prog.cu` without a GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.design_space import Directives, Topology
from cuco.evaluate.static import check_program
from cuco.fastpath import annotate
from cuco.kit.evolve import EVOLVE_START
from cuco.program.observation import FP32_RTOL, Observation, compare
from cuco.program.space import MOVEMENT, point_block
from cuco.program.source import HostProgram, ProgramError
from cuco.program.workload import ProgramWorkload

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
BAD = Path(__file__).parent / "fixtures" / "bad_programs"
sys.path.insert(0, str(CORPUS))
from corpus import params  # noqa: E402  (the manifest's programs; known gaps marked as expected failures)


def _frozen(code: str) -> str:
    """Everything outside the EVOLVE blocks."""
    out, inside = [], False
    for line in code.splitlines():
        s = line.strip()
        if s.startswith(annotate.START):
            inside = True
        elif s.startswith(annotate.END):
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


# -- bad input ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name, message", [
    ("needs_args", r"needs_args.cu:9: the program reads command-line arguments .*getenv"),
    ("no_comm", r"no NCCL collective or send/recv call found"),
])
def test_programs_cuco_cannot_run_are_refused_naming_the_fix(name, message):
    with pytest.raises(ProgramError, match=message):
        HostProgram.load(BAD / f"{name}.cu")


def test_a_missing_file_and_a_non_cuda_file_are_refused(tmp_path):
    with pytest.raises(ProgramError, match="no such file"):
        HostProgram.load(tmp_path / "nope.cu")
    (tmp_path / "x.py").write_text("print(1)\n")
    with pytest.raises(ProgramError, match=r"\.cu"):
        HostProgram.load(tmp_path / "x.py")


# -- observed text and rendering -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", params("analysis"))
def test_the_observed_program_times_the_statements_around_every_collective(name):
    p = HostProgram.load(CORPUS / f"{name}.cu")
    lines = p.observed.splitlines()
    assert lines[0].startswith('#include "cuco/program/observe.h"')
    begins = [i for i, ln in enumerate(lines) if "cuco_region_begin(" in ln]
    ends = [i for i, ln in enumerate(lines) if "cuco_region_end(" in ln]
    assert len(begins) == len(ends) == p.sites >= 1
    for c in p.observed_analysis().collectives:   # every collective sits inside a region
        assert any(b < c.line - 1 < e for b, e in zip(begins, ends)), c.line
    # the original text is untouched apart from the inserted lines
    kept = [ln for ln in lines[1:] if "cuco_region_" not in ln]
    assert kept == p.text.splitlines()


def _expected_size(kinds: tuple[str, ...]) -> int:
    """placement x comm_ctas (5), and with a movement collective x sync_scope x (cta, or copy_engine x 3 chunk sizes,
    with comm_ctas fixed when every collective is a movement one); x 4 AllReduce algorithms with an AllReduce, x 3
    ReduceScatter algorithms with a ReduceScatter."""
    algos = (4 if "allreduce" in kinds else 1) * (3 if "reducescatter" in kinds else 1)
    if not set(kinds) & set(MOVEMENT):
        return 2 * 5 * algos
    ce_ctas = 1 if set(kinds) <= set(MOVEMENT) else 5
    return 2 * 2 * (5 + 3 * ce_ctas) * algos


@pytest.mark.parametrize("name", params("analysis"))
def test_every_point_renders_with_the_same_frozen_text_and_no_host_collective(name):
    w = ProgramWorkload.load(CORPUS / f"{name}.cu")
    space = w.space(Topology(world=1))
    codes = [w.render(p) for p in space.points()]
    assert len(codes) == space.size() == _expected_size(w.program.analysis.kinds())
    frozen = {_frozen(c) for c in codes}
    assert len(frozen) == 1, "design points differ outside the EVOLVE blocks"
    for point, code in zip(space.points(), codes):
        annotate.check_markers(code)
        assert f"// cuco design point: {point.label()}" in code
        assert f"#define CUCOFP_CHUNK_BYTES {point.chunk_bytes}  //" in code
        if "allreduce" in w.program.analysis.kinds():
            algo = ("auto", "one_shot", "two_shot", "push").index(point.get("allreduce"))
            assert f"#define CUCOFP_ALLREDUCE {algo}" in code
        if "reducescatter" in w.program.analysis.kinds():
            assert f"#define CUCOFP_REDUCESCATTER {('auto', 'barrier', 'push').index(point.get('reducescatter'))}" in code
        assert f"#define CUCOFP_COMM_CTAS {point.get('comm_ctas')}\n" in code
        if point.get("comm_ctas") in ("32", "8"):  # the others differ from these in that number only
            res = check_program(code, parent_code=codes[0])
            assert res.passed, res.reason
        # the region markers stay outside the EVOLVE blocks (frozen): every point is timed over the same statements
        assert code.count("cuco_region_begin(") == _frozen(code).count("cuco_region_begin(")


def test_the_fast_paths_point_keeps_the_default_macros_and_illegal_points_say_why():
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    space = w.space(Topology(world=1))
    fast = space.conservative()
    assert fast.label() == "lsa/deferred/world/cta/whole/comm_ctas=32/reducescatter=auto"
    block = point_block(fast)
    for macro in ("PLACEMENT 0", "COMM_CTAS 32", "SYNC_SCOPE 0", "ISSUER 0", "CHUNK_BYTES 0"):
        assert f"#define CUCOFP_{macro}" in block          # the defaults of lsa_point.cuh: today's code paths
    chunked_cta = Directives.from_label("lsa/deferred/world/cta/4MiB/comm_ctas=32/reducescatter=barrier")
    assert "program-chunks-need-copy-engine" in space.check(chunked_cta)
    ce = Directives.from_label("lsa/stream_overlap/signal/copy_engine/1MiB/comm_ctas=8/reducescatter=push")
    assert space.is_legal(ce)                             # the ReduceScatter still runs on 8 CTAs
    only_movement = ProgramWorkload.load(CORPUS / "moe_alltoall_pool.cu").space(Topology(world=1))
    plain = Directives.from_label("lsa/stream_overlap/signal/copy_engine/1MiB/comm_ctas=8")
    assert "program-comm-ctas-unused" in only_movement.check(plain)
    assert only_movement.is_legal(plain.replace(comm_ctas="32"))
    reductions = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu").space(Topology(world=1))
    assert reductions.values("issuer") == ("cta",) and reductions.values("sync_scope") == ("world",)
    assert reductions.values("chunk_bytes") == (0,)
    many = Directives.from_label("lsa/deferred/world/cta/whole/comm_ctas=128/reducescatter=barrier")
    assert space.is_legal(many)                           # 128 CTAs fit an H100's 132 SMs, one each
    small_gpu = w.space(Topology(world=1, sm_count=114))
    why = small_gpu.check(many)
    assert "program-comm-ctas-fit" in why and "comm_ctas <= 114" in why
    assert small_gpu.is_legal(many.replace(comm_ctas="64"))


def test_copy_engine_copies_wait_for_their_entry_kernel_and_delayed_arrival_poisons_what_they_fill():
    """What tests/test_program_points_gpu.py removes to show that verification catches a missing entry wait."""
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    code = w.render(Directives.from_label("lsa/deferred/world/copy_engine/1MiB/comm_ctas=32/reducescatter=barrier"))
    wait = "CUCOFP_CUDA(cudaStreamWaitEvent(s->copy[i], s->entered, 0));   // the entry wait"
    assert code.count(wait) == 1
    body = code[code.index("inline ncclResult_t launchCopies("):]
    assert body.index("poisonLate(x.dst") < body.index("copyEntryKernel<MoveSync><<<") < body.index(wait)
    assert "cudaMemsetAsync(dst, 0xff" in code                 # the poison, only under CUCO_DELAY_COMM_US


@pytest.mark.parametrize("name", ["sp_mlp_ag_rs", "bcast_weights_async"])
def test_the_directive_mutator_reaches_every_value_of_every_directive(name):
    import random

    from cuco.search.mutators.base import MutationContext
    from cuco.search.mutators.directive import DirectiveMutator

    w = ProgramWorkload.load(CORPUS / f"{name}.cu")
    space = w.space(Topology(world=1))
    parent, seen, reached = w.fast_path(Topology(world=1)), set(), set()
    rng = random.Random(7)
    for _ in range(space.size()):
        seen.add(parent.directives.label())
        child = DirectiveMutator().near(parent, MutationContext(w, space, seen=seen), rng)
        assert space.is_legal(child.directives) and child.code == w.render(child.directives)
        reached |= {(n, child.directives.get(n)) for n in space.names}
        parent = child
    assert reached == {(n, v) for n in space.names for v in space.values(n)}


def test_compute_that_feeds_and_consumes_a_collective_is_inside_the_evolve_block():
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    code = w.render(w.space(Topology(world=1)).conservative())
    block = code.split("EVOLVE-BLOCK-START pipeline", 1)[1].split("EVOLVE-BLOCK-END pipeline", 1)[0]
    for stmt in ("embed_slice<<<", "cucoAllGather(", "mlp_shard<<<", "cucoReduceScatter("):
        assert stmt in block
    # the stream waits for the gather before the kernel that reads it, not later
    assert block.index("cucoAllGather(") < block.index("cucoJoin();") < block.index("mlp_shard<<<")


def test_single_process_programs_synchronise_every_device_around_a_region():
    p = HostProgram.load(CORPUS / "ag_tp_matvec.cu")
    assert "cuco_region_begin(0, 1);" in p.observed
    assert "cuco_region_begin(0, 0);" in HostProgram.load(CORPUS / "rs_grad_shard.cu").observed


def test_a_program_the_rules_cannot_rewrite_is_refused_before_any_search(tmp_path):
    text = (CORPUS / "rs_grad_shard.cu").read_text().replace("shard, ncclFloat, ncclSum", "shard, ncclFloat8e4m3, ncclSum")
    (tmp_path / "fp8_sum.cu").write_text(text)
    with pytest.raises(ProgramError, match=r"(?s)reduces an fp8 type.*cuco transform .* --model"):
        HostProgram.load(tmp_path / "fp8_sum.cu")


# -- observation: read-backs and regions ---------------------------------------------------------------------
def _write_obs(d: Path, pid: int, reads: list[tuple[int, int, bytes]], regions: list[tuple[int, int, int, float]]):
    blob, lines, off = b"", [], 0
    for dev, seq, data in reads:
        lines.append(f"readback {dev} {seq} {off} {len(data)}")
        blob += data
        off += len(data)
    lines += [f"region {s} {dev} {i} {ms}" for s, dev, i, ms in regions]
    (d / f"obs-{pid}.bin").write_bytes(blob)
    (d / f"obs-{pid}.txt").write_text("\n".join(lines) + "\n")


def test_observation_files_of_several_processes_are_read_and_timed(tmp_path):
    a, b = np.arange(8, dtype=np.float32), np.ones(4, dtype=np.float32)
    _write_obs(tmp_path, 10, [(0, 0, a.tobytes())], [(0, 0, 0, 9.0), (0, 0, 1, 1.0), (0, 0, 2, 3.0)])
    _write_obs(tmp_path, 11, [(1, 0, b.tobytes())], [(0, 1, 0, 8.0), (0, 1, 1, 2.0), (0, 1, 2, 4.0)])
    (tmp_path / "obs-12.bin").write_bytes(b"")   # an incomplete process (no index yet) is ignored
    obs = Observation.read(tmp_path)
    assert set(obs.readbacks) == {(0, 0), (1, 0)}
    # warm instances only (the first is dropped), median per device, the slowest device
    assert obs.region_ms() == pytest.approx(3.0)


def test_a_site_that_ran_once_is_timed_by_its_only_instance(tmp_path):
    _write_obs(tmp_path, 1, [], [(0, 0, 0, 5.0), (1, 0, 0, 2.0)])
    assert Observation.read(tmp_path).region_ms() == pytest.approx(7.0)
    assert Observation({}, ()).region_ms() is None


floats = st.lists(st.floats(-1e4, 1e4, allow_nan=False, width=32), min_size=1, max_size=64)


@settings(max_examples=60, deadline=None)
@given(floats)
def test_identical_read_backs_compare_equal_and_rounding_is_tolerated(values):
    x = np.array(values, dtype=np.float32)
    ref = Observation({(0, 0): x.tobytes()}, ())
    assert compare(ref, Observation({(0, 0): x.tobytes()}, ()))[0]
    scale = float(np.max(np.abs(x)))
    nudged = (x.astype(np.float64) + scale * FP32_RTOL * 0.25).astype(np.float32)
    assert compare(ref, Observation({(0, 0): nudged.tobytes()}, ()))[0]


@settings(max_examples=60, deadline=None)
@given(floats, st.integers(0, 63))
def test_a_wrong_element_missing_or_extra_read_back_is_reported(values, where):
    x = np.array(values, dtype=np.float32)
    ref = Observation({(0, 0): x.tobytes()}, ())
    bad = x.copy()
    i = where % len(bad)
    bad[i] = bad[i] + max(1.0, float(np.max(np.abs(x)))) * 1e-3
    ok, how = compare(ref, Observation({(0, 0): bad.tobytes()}, ()))
    assert not ok and "differs" in how
    assert not compare(ref, Observation({}, ()))[0]
    assert not compare(ref, Observation({(0, 0): x.tobytes(), (0, 1): x.tobytes()}, ()))[0]


def test_non_float_bytes_must_match_exactly():
    ref = Observation({(0, 0): b"abc"}, ())
    assert compare(ref, Observation({(0, 0): b"abc"}, ()))[0]
    assert not compare(ref, Observation({(0, 0): b"abd"}, ()))[0]


# -- cuco run prog.cu on the CPU ------------------------------------------------------------------------------
def _cuco(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/local/bin:/usr/bin:/bin"}
    import os

    env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "cuco.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=900)


def test_cuco_run_on_a_program_without_a_gpu_checks_and_compiles_every_candidate(tmp_path):
    res = _cuco("run", str(CORPUS / "bcast_weights_async.cu"), "--evals", "2", "--run-dir", str(tmp_path / "r"),
                "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["workload"] == "bcast_weights_async" and summary["evaluation"] == "unmeasured"
    assert summary["counts"] == {"unmeasured": 2}
    assert summary["fastpath"]["point"] == "lsa/deferred/world/cta/whole/comm_ctas=32"
    assert not (tmp_path / "r" / "best").exists()   # nothing verified, nothing written out as best
    # the event log: the run's messages and each candidate's stages, timestamped, in order
    events = (tmp_path / "r" / "events.log").read_text().splitlines()
    assert any("fast path candidate: unmeasured" in e for e in events)
    ids = {c["id"] for c in (summary["fastpath"],)}
    assert any(f"candidate {i} compile" in e for e in events for i in ids)
    assert sum(e.endswith(" done") for e in events) == 2   # both candidates' results final
    stamps = [e.split(" ", 1)[0] for e in events]
    assert stamps == sorted(stamps) and all(s.endswith("+00:00") for s in stamps)
    from cuco.errors import CucoError
    from cuco.report.timeline import trace_run

    with pytest.raises(CucoError, match="not a built-in workload.*nsys"):   # timelines are for workload runs
        trace_run(tmp_path / "r")


def test_cuco_run_refuses_a_bad_program_before_writing_anything(tmp_path):
    res = _cuco("run", str(BAD / "needs_args.cu"), "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert res.returncode != 0
    assert "reads command-line arguments" in res.stderr and "getenv" in res.stderr
    assert not (tmp_path / "r").exists()
    res = _cuco("run", str(CORPUS / "rs_grad_shard.cu"), "--shape", "1,2,3", "--run-dir", str(tmp_path / "r"),
                cwd=tmp_path)
    assert res.returncode != 0 and "drop --shape" in res.stderr and not (tmp_path / "r").exists()


def test_best_is_written_whole_with_its_point_timing_and_verification(tmp_path):
    from cuco.candidate import LevelResult
    from cuco.run import write_best

    w = ProgramWorkload.load(CORPUS / "rs_grad_shard.cu")
    c = w.fast_path(Topology(world=1))
    c = c.with_result(LevelResult("verify", True, "", 0.1, {"how": "bit-identical", "delay_comm_us": 2000.0}))
    c = c.with_result(LevelResult("bench", True, "", 0.1, {"device": "X", "runs_ms": [1.0]}))
    c = c.evolve(metrics={"time_ms": 1.0, "host_ms": 2.0, "speedup": 2.0})
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "stale.txt").write_text("old")
    out = write_best(tmp_path, c, w)
    info = json.loads((out / "best.json").read_text())
    assert info["point"] == c.directives.label() and info["metrics"]["speedup"] == 2.0
    assert info["verified"]["verify"]["data"]["delay_comm_us"] == 2000.0 and info["kind"] == "program"
    assert (out / "kernel.cu").read_text() == c.code and not (out / "stale.txt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".best")]


def test_observe_header_is_self_contained_and_compiles():
    from cuco.fastpath.verify import build

    # the markers as cuco writes them: the jump back crosses a declaration of the range that is used after it
    code = ('#include "cuco/program/observe.h"\n#include <vector>\nint main() { std::vector<float> h(4);\n'
            '  float* d; cudaMalloc(&d, 16);\n  cuco_rep_0: cuco_region_begin(0, 0);\n  std::vector<int> n(2);\n'
            '  if (cuco_region_end(0, 0)) goto cuco_rep_0;\n'
            '  cudaMemcpy(h.data(), d, 16 + 0 * n.size(), cudaMemcpyDeviceToHost); return 0; }\n')
    import tempfile

    out = build(code, workdir=Path(tempfile.mkdtemp()), cache=False)
    assert out.ok, out.log[-2000:]
    assert re.search(r"cuco_observed_memcpy", (Path(__file__).parents[1] / "csrc" / "include" / "cuco" / "program" /
                                               "observe.h").read_text())
    assert EVOLVE_START  # the marker constant is shared with the kit


def test_a_program_run_resumes_and_refuses_a_changed_program(tmp_path):
    prog = tmp_path / "prog.cu"
    prog.write_text((CORPUS / "rs_grad_shard.cu").read_text().replace('"host_util.h"', f'"{CORPUS / "host_util.h"}"'))
    run = tmp_path / "r"
    assert _cuco("run", str(prog), "--evals", "2", "--run-dir", str(run), "--quiet", cwd=tmp_path).returncode == 0
    res = _cuco("run", str(prog), "--evals", "3", "--run-dir", str(run), "--resume", "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((run / "summary.json").read_text())["evaluated"] == 3
    prog.write_text(prog.read_text().replace("0.25f", "0.5f"))
    res = _cuco("run", str(prog), "--evals", "4", "--run-dir", str(run), "--resume", "--quiet", cwd=tmp_path)
    assert res.returncode != 0 and "cannot resume" in res.stderr


def test_each_candidate_of_a_batch_builds_in_the_folder_of_its_id(tmp_path, monkeypatch):
    """Two rewrites compiled in one batch must not share a source file: each builds in its own id's folder (a
    batch holds each id once: copies made with evolve() keep their id and are refused)."""
    import shutil

    from cuco.evaluate.batch import Batch
    from cuco.program.evaluator import ProgramEvaluator

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc (the evaluator detects its toolchain)")
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    fast = w.fast_path(Topology(world=1))
    ev = ProgramEvaluator(w.program, world=1, work_dir=tmp_path)
    folders: list[str] = []

    def recording_build(code: str, name: str):  # a test double for nvcc: records where each build would go
        folders.append(name)
        return None, "not built"

    monkeypatch.setattr(ev, "_build", recording_build)
    batch = Batch([fast, fast.child(fast.code + "\n// another\n", fast.directives, "manual")])
    ev.compile_level(batch, batch.ids)
    assert sorted(folders) == sorted(f"candidate-{cid}" for cid in batch.ids), folders


def test_the_runtimes_own_copies_are_not_recorded_as_the_programs_read_backs(tmp_path):
    """observe.h records the program's device-to-host copies; the runtime's peer-base and copy-engine copies must
    call the real cudaMemcpyAsync (else every copy-engine point reads back more buffers than the program)."""
    import shutil

    from cuco.fastpath.verify import host_toolchain
    from cuco.toolchain import csrc_dir

    if shutil.which("nvcc") is None:
        pytest.skip("needs nvcc's preprocessor")
    w = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    src = tmp_path / "program.cu"
    src.write_text(w.render(Directives.from_label("lsa/stream_overlap/world/copy_engine/1MiB/comm_ctas=16/"
                                                  "reducescatter=barrier")))
    tc = host_toolchain()
    out = subprocess.run([str(tc.nvcc), "-E", "-x", "cu", f"-I{CORPUS}", f"-I{csrc_dir() / 'include'}",
                          f"-I{tc.nccl.include}", str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for runtime_copy in ("m.base.data(), s->peerScratch", "xs[t].dst + off"):  # the runtime: the real call
        assert f"cuco_observed_memcpy_async({runtime_copy}" not in text
        assert re.search(rf"\(cudaMemcpyAsync\({re.escape(runtime_copy)}", text)
    assert re.search(r"cuco_observed_memcpy_async\(h\.data\(\), out_slice", text)  # the program: observed
