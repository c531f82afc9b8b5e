"""Refusals of the rule-based rewrite name the line and the construct (the agent then hands them to the LLM
loop when a model is given: tests/test_fastpath_llm_replay.py)."""

from cuco.fastpath.analyze import analyze
from cuco.fastpath.transform import plan

HEAD = "#include <nccl.h>\n#include <vector>\n"


def test_managed_memory_is_refused_with_its_line():
    code = """
void f(ncclComm_t comm, cudaStream_t s) {
  float *a, *b;
  cudaMallocManaged(&a, 64);
  cudaMalloc(&b, 64);
  ncclAllGather(a, b, 4, ncclFloat, comm, s);
}"""
    (p,) = plan(analyze(HEAD + code)).problems
    assert p.line == 6 and "line 6: `a` (send buffer of ncclAllGather at line 8) is allocated with cudaMallocManaged" \
        in p.message


def test_custom_reduction_operator_is_refused_where_it_is_created():
    code = """
void f(ncclComm_t comm, cudaStream_t s) {
  float *a;
  cudaMalloc(&a, 64);
  float scale = 0.5f;
  ncclRedOp_t op;
  ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat, ncclScalarHostImmediate, comm);
  ncclAllReduce(a, a, 16, ncclFloat, op, comm, s);
}"""
    (p,) = plan(analyze(HEAD + code)).problems
    assert p.line == 9 and "line 9: ncclRedOpCreatePreMulSum creates a custom reduction operator" in p.message
