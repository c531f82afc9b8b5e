"""The pipeline range (cuco.fastpath.pipeline): the statements a search may rearrange and the program harness
times, from the first kernel feeding a collective to the last consuming one, with nothing fenced inside."""

from __future__ import annotations

import pytest

from cuco.fastpath import parse as P
from cuco.fastpath.analyze import analyze
from cuco.fastpath.pipeline import pipeline_ranges

HEAD = "#include <nccl.h>\n__global__ void k(float* x) { x[threadIdx.x] += 1; }\n"
LAUNCHER = "static void launch(float* x, cudaStream_t s) { k<<<1, 256, 0, s>>>(x); }\n"
WAITER = "static void launch(float* x, cudaStream_t s) { k<<<1, 256, 0, s>>>(x); cudaStreamSynchronize(s); }\n"


def _ranges(text: str) -> list[tuple[str, ...]]:
    """Each range as the stripped source lines it covers."""
    lines = text.splitlines()
    ranges = pipeline_ranges(P.parse(text), analyze(text, "p.cu"))
    return [tuple(ln.strip() for ln in lines[lo - 1:hi]) for lo, hi, _ in ranges]


def _main(helper: str, body: str) -> str:
    return HEAD + helper + """int main() {
  ncclComm_t comm; ncclUniqueId id; ncclGetUniqueId(&id); ncclCommInitRank(&comm, 1, id, 0);
  cudaStream_t s; cudaStreamCreate(&s); float* x; cudaMalloc(&x, 1024);
""" + body + "  return 0;\n}\n"


STEP = """  launch(x, s);
  ncclAllReduce(x, x, 256, ncclFloat, ncclSum, comm, s);
  k<<<1, 256, 0, s>>>(x);
"""


@pytest.mark.parametrize("helper, first", [(LAUNCHER, "launch(x, s);"),
                                           (WAITER, "ncclAllReduce(x, x, 256, ncclFloat, ncclSum, comm, s);")])
def test_a_helper_that_only_launches_joins_the_range_one_that_waits_does_not(helper, first):
    (rng,) = _ranges(_main(helper, STEP))
    assert rng[0] == first and rng[-1] == "k<<<1, 256, 0, s>>>(x);"


def test_the_range_of_collectives_in_an_raii_scope_lies_inside_the_scope():
    body = "  {\n" + STEP + "    cudaStreamSynchronize(s);\n  }\n"
    (rng,) = _ranges(_main(LAUNCHER, body))
    assert rng == ("launch(x, s);", "ncclAllReduce(x, x, 256, ncclFloat, ncclSum, comm, s);",
                   "k<<<1, 256, 0, s>>>(x);")


def test_a_block_with_nothing_fenced_stays_one_statement_of_the_range():
    body = "  {\n" + STEP + "  }\n"
    (rng,) = _ranges(_main(LAUNCHER, body))
    assert rng[0] == "{" and rng[-1] == "}"
