"""Storage classes: a collective's buffer is traced back to its allocation through the idioms people use
(range-for over brace lists, templated helpers, lambdas, aliases, containers, pools, struct fields)."""

import pytest

from cuco.fastpath.analyze import analyze
from cuco.fastpath.transform import plan

HEAD = "#include <nccl.h>\n#include <vector>\n"


def _allocated_for(code: str) -> dict[str, list[tuple[str, int]]]:
    """buffer of each collective -> (allocated variable, line) of the allocations that reach it."""
    a = analyze(HEAD + code)
    out = {}
    for c in a.collectives:
        for buf, sid in ((c.send_buffer, c.send_storage), (c.recv_buffer, c.recv_storage)):
            if buf:
                out[buf] = [(x.variable, x.line) for x in a.allocations if x.storage == sid]
    return out


IDIOMS = {
    "range-for over a brace list of addresses": ("""
void f(ncclComm_t comm, cudaStream_t s) {
  float *x, *y, *other;
  for (float** p : {&x, &y}) cudaMalloc(p, 64);
  cudaMalloc(&other, 64);
  ncclAllGather(x, y, 4, ncclFloat, comm, s);
}""", {"x": [("p", 6)], "y": [("p", 6)]}),
    "templated helper allocator": ("""
template <typename T> T* device_alloc(size_t n) { T* p = nullptr; cudaMalloc(&p, n * sizeof(T)); return p; }
void f(ncclComm_t comm, cudaStream_t s) {
  float* g = device_alloc<float>(64);
  float* h = device_alloc<float>(64);
  ncclReduceScatter(g, h, 4, ncclFloat, ncclSum, comm, s);
}""", {"g": [("p", 4)], "h": [("p", 4)]}),
    "allocation lambda": ("""
void f(ncclComm_t comm, cudaStream_t s) {
  auto alloc = [](float** q, size_t n) { cudaMalloc(q, n * sizeof(float)); };
  float *a, *b;
  alloc(&a, 16);
  alloc(&b, 16);
  ncclReduce(a, b, 16, ncclFloat, ncclSum, 0, comm, s);
}""", {"a": [("q", 5)], "b": [("q", 5)]}),
    "pointer alias into a buffer": ("""
void f(ncclComm_t comm, cudaStream_t s, int off) {
  float* kv;
  cudaMalloc(&kv, 1024);
  float* slot = kv + off;
  ncclSend(slot, 8, ncclFloat, 0, comm, s);
}""", {"slot": [("kv", 6)]}),
    "vector of offsets into one allocation": ("""
void f(ncclComm_t comm, cudaStream_t s) {
  float* flat;
  cudaMalloc(&flat, 4096);
  std::vector<float*> buckets;
  for (int off : {0, 256}) buckets.push_back(flat + off);
  ncclAllReduce(buckets[1], buckets[1], 256, ncclFloat, ncclSum, comm, s);
}""", {"buckets": [("flat", 6)]}),
    "pool with casts": ("""
void f(ncclComm_t comm, cudaStream_t s) {
  char* pool;
  cudaMalloc(&pool, 8192);
  float* in = reinterpret_cast<float*>(pool);
  float* out = (float*)(pool + 4096);
  ncclAlltoAll(in, out, 16, ncclFloat, comm, s);
}""", {"in": [("pool", 6)], "out": [("pool", 6)]}),
    "struct fields filled by a helper": ("""
struct Bufs { float* send; float* recv; };
static void alloc_bufs(Bufs* b, size_t n) { cudaMalloc(&b->send, n); cudaMalloc(&b->recv, n); }
void f(ncclComm_t comm, cudaStream_t s) {
  Bufs buf;
  alloc_bufs(&buf, 64);
  ncclAllGather(buf.send, buf.recv, 4, ncclFloat, comm, s);
}""", {"buf.send": [("b->send", 5)], "buf.recv": [("b->recv", 5)]}),
    "swapped double buffers and cudaMallocAsync": ("""
void f(ncclComm_t comm, cudaStream_t s) {
  float *cur, *nxt;
  cudaMallocAsync(&cur, 64, s);
  cudaMallocAsync(&nxt, 64, s);
  std::swap(cur, nxt);
  ncclSend(cur, 4, ncclFloat, 0, comm, s);
}""", {"cur": [("cur", 6), ("nxt", 7)]}),
}


@pytest.mark.parametrize("idiom", sorted(IDIOMS))
def test_buffers_are_traced_to_their_allocations(idiom):
    code, expected = IDIOMS[idiom]
    assert _allocated_for(code) == expected
    assert plan(analyze(HEAD + code)).problems == ()


def test_unrelated_allocations_stay_plain():
    code, _ = IDIOMS["range-for over a brace list of addresses"]
    a = analyze(HEAD + code)
    comm = {c.send_storage for c in a.collectives} | {c.recv_storage for c in a.collectives}
    assert [x.variable for x in a.allocations if x.storage not in comm] == ["other"]


def test_same_name_in_two_functions_is_two_variables():
    code = """
void helper() { float* buf; cudaMalloc(&buf, 64); }
void f(ncclComm_t comm, cudaStream_t s, float* buf) { ncclAllGather(buf, buf, 4, ncclFloat, comm, s); }"""
    assert _allocated_for(code) == {"buf": []}
    problems = plan(analyze(HEAD + code)).problems
    assert problems and "line 5: the send buffer `buf` of ncclAllGather is a parameter of f()" in problems[0].message
