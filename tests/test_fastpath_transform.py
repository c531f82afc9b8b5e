"""Rule-based transforms: every pattern compiles for sm_90 with nvcc, has no host collective left and has
balanced EVOLVE-BLOCK markers; bad inputs give precise errors."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuco.fastpath import annotate, verify
from cuco.fastpath.agent import FastPathAgent
from cuco.fastpath.analyze import analyze, analyze_file
from cuco.fastpath.model import FastPathError
from cuco.fastpath.transform import transform

FIX = Path(__file__).parent / "fixtures" / "fastpath"
PROGRAMS = {
    "ag_two_streams": ("lsa-allgather-pull@L47",),
    "alltoall_reduce": ("lsa-alltoall-pull@L38", "lsa-allreduce-rs-ag@L45", "lsa-reducescatter-pull@L48"),
    "ring_threads": ("lsa-p2p-mailbox@L34", "lsa-p2p-mailbox@L35", "lsa-broadcast-pull@L40", "lsa-broadcast-pull@L41"),
    "alltoallv_p2p": ("lsa-p2p-mailbox@L40", "lsa-p2p-mailbox@L41"),
    "abi_allgather_seed": ("lsa-allgather-pull@L19",),
}
#: A point of more CTAs than 32 (the macro ahead of the rewrite, where a point block sets it): the program whose
#: rewrite has reductions, signal-free movement and the barriers, at 128 CTAs.
WIDE = ("alltoall_reduce", 128)


def _transform(name):
    path = FIX / f"{name}.cu"
    return transform(analyze_file(path), path.read_text())


def _wide_code():
    name, ctas = WIDE
    return (f"#define CUCOFP_COMM_CTAS {ctas}\n" + _transform(name).code
            + f"\nstatic_assert(cucofp::kCtas == {ctas} && cucofp::kCommCtas == {ctas}, \"laid out for the CTAs\");\n")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Compile every transformed program once, and WIDE's (two nvcc jobs at a time)."""
    root = tmp_path_factory.mktemp("fastpath")

    def one(name):
        if name == "wide":
            return name, verify.build(_wide_code(), workdir=root / name, include_dirs=[FIX])
        t = _transform(name)
        return name, verify.build(t.code, workdir=root / name, include_dirs=[FIX], shared=t.form == "candidate_abi")

    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, [*PROGRAMS, "wide"]))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rules_output_is_device_initiated(name):
    t = _transform(name)
    assert t.rules_applied == PROGRAMS[name]
    assert analyze(t.code).collectives == ()             # no host collective remains
    assert annotate.check_markers(t.code) >= 2            # LSA kernels + the program's pipeline/kernels
    assert "ncclDevCommCreate" in t.code and "ncclGetLsaPointer" in t.code and "ncclLsaBarrierSession" in t.code
    original = (FIX / f"{name}.cu").read_text()
    assert t.code.count("\n") > original.count("\n")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rules_output_compiles_for_sm90(builds, name):
    out = builds[name]
    assert out.ok, out.log[-3000:]


def test_a_point_of_more_than_32_ctas_lays_the_mailbox_and_the_barriers_out_for_them(builds):
    # kCtas sizes the per-CTA acknowledgements and flags and the LSA barriers requested; 32 and fewer keep 32
    assert builds["wide"].ok, builds["wide"].log[-3000:]


def test_standalone_rewrites_allocation_and_teardown():
    code = _transform("ag_two_streams").code
    assert "CUDACHECK(cucoSymAlloc(&send[r], n * sizeof(float)));" in code
    assert "CUDACHECK(cudaMalloc(&acc[r]" in code            # not communicated: stays a plain allocation
    assert "NCCLCHECK(cucoAllGather(send[r], recv[r], n, ncclFloat, comms[r], comm[r]));" in code
    assert "NCCLCHECK(cucoGroupStart());" in code and "NCCLCHECK(cucoCommDestroy(comms[r]));" in code
    assert "CUDACHECK(cucoSymFree(send[r]));" in code and "CUDACHECK(cudaFree(acc[r]));" in code
    pipeline = code[code.index("// EVOLVE-BLOCK-START pipeline"):code.index("// EVOLVE-BLOCK-END pipeline")]
    assert "for (int it = 0; it < 3; ++it)" in pipeline and "cucoSymAlloc" not in pipeline


def test_candidate_abi_declares_requirements_and_binds():
    code = _transform("abi_allgather_seed").code
    assert 'extern "C" int cuco_fp_seed_requirements(' in code
    assert 'extern "C" int cuco_candidate_requirements(' in code and "cucoFpRequire(ctx, req);" in code
    assert "if (cucoFpBind(ctx) != 0) return 1;" in code
    wrapper = code[code.rindex("extern \"C\" int cuco_candidate_launch"):]
    assert "EVOLVE" not in wrapper                          # entry points are frozen


def test_markers_detect_nesting_and_imbalance():
    with pytest.raises(FastPathError, match="nest"):
        annotate.check_markers("// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-START\n// EVOLVE-BLOCK-END\n")
    with pytest.raises(FastPathError, match="never closed"):
        annotate.check_markers("// EVOLVE-BLOCK-START\nint x;\n")
    assert annotate.check_markers(annotate.wrap("int x;", "a") + annotate.wrap("int y;\n")) == 2


@pytest.mark.parametrize("fixture, pattern", [
    ("bad_not_cuda.txt", r"does not parse as CUDA C\+\+"),
    ("bad_no_nccl.cu", r"no NCCL collective"),
    ("bad_unknown_collective.cu", r"ncclGather at line 9 has no fast-path rule"),
    ("bad_untraced_comm.cu", r"line 8 uses communicator `\(ncclComm_t\)getCommHandle\(\)`"),
])
def test_bad_inputs_fail_before_compiling(fixture, pattern):
    with pytest.raises(FastPathError, match=pattern):
        FastPathAgent(check_input=False).run(FIX / fixture)


def test_input_that_does_not_compile_is_rejected_with_its_line():
    with pytest.raises(FastPathError, match=r"does not compile as given.*line 9: identifier \"undeclared_stream\""):
        FastPathAgent().run(FIX / "bad_does_not_compile.cu")


def test_buffer_not_allocated_in_file_is_reported():
    code = """#include <nccl.h>
void step(ncclComm_t comm, float* in, float* out, cudaStream_t s) {
  ncclAllGather(in, out, 16, ncclFloat, comm, s);
}"""
    with pytest.raises(FastPathError, match=r"line 3: the send buffer `in` of ncclAllGather is a parameter of "
                       r"step\(\) and no call in this file passes it memory allocated here"):
        transform(analyze(code), code)


def test_the_prelude_is_the_kernels_runtime_and_api_in_order_without_header_guards():
    from cuco.fastpath.transform import prelude

    for form in ("standalone", "candidate_abi"):
        text = prelude(form)
        order = [text.index(s) for s in ("__global__ void __launch_bounds__(kThreads) allgatherKernel",
                                         "struct CommState", "static inline ncclResult_t cucoAllGather")]
        assert order == sorted(order) and "#pragma once" not in text and '#include "lsa_' not in text
        assert ("CUCOFP_PROGRAM_HOOKS 1" in text) == (form == "standalone")
        assert ("ncclResult_t cucoCommInitRank(" in text) == (form == "standalone")   # the harness owns comms there


def test_the_rewrite_compiles_reductions_only_for_the_types_the_program_reduces():
    from cuco.fastpath.transform import ALL_REDUCE_TYPES, REDUCE_TYPE_BITS, reduce_types

    corpus = Path(__file__).parent / "fixtures" / "host_programs"
    moved_only = analyze((corpus / "ag_tp_matvec.cu").read_text(), "ag_tp_matvec.cu")
    floats = analyze((corpus / "rs_grad_shard.cu").read_text(), "rs_grad_shard.cu")
    assert reduce_types(moved_only) == 0 and reduce_types(floats) == 1 << REDUCE_TYPE_BITS["ncclFloat"]
    text = (corpus / "rs_grad_shard.cu").read_text().replace("shard, ncclFloat, ncclSum", "shard, dtype, ncclSum")
    text = text.replace('#include "host_util.h"', '#include "host_util.h"\nstatic ncclDataType_t dtype = ncclFloat;')
    assert reduce_types(analyze(text, "rs_grad_shard.cu")) == ALL_REDUCE_TYPES   # not a literal: every type
    code = transform(floats, (corpus / "rs_grad_shard.cu").read_text()).code
    assert f"#define CUCOFP_REDUCE_TYPES {1 << REDUCE_TYPE_BITS['ncclFloat']:#x}" in code
