"""Buffers owned by objects: RAII classes (cudaMalloc in the constructor, `.data()`), containers of them, smart
pointers made by a factory (`.get()`), classes with several buffer members, and one process that creates every
device's communicator with ncclCommInitRank in a group. A buffer whose owner allocates outside the file is refused
with that reason."""

from __future__ import annotations

from cuco.fastpath.analyze import analyze
from cuco.fastpath.transform import plan

_HEAD = "#include <nccl.h>\n#include <memory>\n#include <vector>\n"
_RAII = """
class Buf {
 public:
  explicit Buf(size_t n) { cudaMalloc(&ptr_, n * 4); }
  ~Buf() { cudaFree(ptr_); }
  float* data() { return ptr_; }
 private:
  float* ptr_ = nullptr;
};
"""


def _storage(code: str):
    a = analyze(_HEAD + code, "t.cu")
    return a, {x.variable: x.storage for x in a.allocations}


def test_an_raii_object_and_a_helper_taking_it_by_reference_reach_the_constructors_allocation():
    a, alloc = _storage(_RAII + """
void step(Buf& g, ncclComm_t comm, cudaStream_t s) { ncclAllReduce(g.data(), g.data(), 8, ncclFloat, ncclSum, comm, s); }
int main() { ncclComm_t comm; cudaStream_t s; Buf grad(8); step(grad, comm, s); }
""")
    assert a.collectives[0].send_storage == alloc["ptr_"] >= 0 and plan(a).problems == ()


def test_a_vector_of_raii_objects_reaches_the_allocation():
    a, alloc = _storage(_RAII + """
int main() { std::vector<ncclComm_t> comms(2); std::vector<Buf> w; std::vector<cudaStream_t> s(2);
  for (int d = 0; d < 2; ++d) w.emplace_back(8);
  for (int d = 0; d < 2; ++d) ncclBroadcast(w[d].data(), w[d].data(), 8, ncclFloat, 0, comms[d], s[d]); }
""")
    assert a.collectives[0].send_storage == alloc["ptr_"] >= 0 and plan(a).problems == ()


def test_a_unique_ptr_from_a_factory_reaches_the_factorys_allocation():
    a, alloc = _storage("""
struct Del { void operator()(float* p) const { cudaFree(p); } };
using DevPtr = std::unique_ptr<float, Del>;
static DevPtr make(size_t n) { float* p = nullptr; cudaMalloc(&p, n * 4); return DevPtr(p); }
int main() { ncclComm_t comm; cudaStream_t s; DevPtr x = make(8), y = make(16);
  ncclAllGather(x.get(), y.get(), 8, ncclFloat, comm, s); }
""")
    c = a.collectives[0]
    assert c.send_storage == c.recv_storage == alloc["p"] >= 0 and plan(a).problems == ()


def test_members_of_a_class_with_several_buffers_keep_their_own_storage():
    a, alloc = _storage("""
class Stage {
 public:
  Stage() { cudaMalloc(&in_, 64); cudaMalloc(&out_, 64); }
  void run() { ncclSend(out_, 8, ncclFloat, 1, comm_, s_); ncclRecv(in_, 8, ncclFloat, 0, comm_, s_); }
 private:
  ncclComm_t comm_; cudaStream_t s_; float* in_; float* out_;
};
int main() { Stage st; st.run(); }
""")
    assert len({alloc["in_"], alloc["out_"]}) == 2


def test_init_rank_in_a_group_without_threads_is_one_process_driving_every_gpu():
    code = """
int main() { ncclUniqueId id; ncclGetUniqueId(&id); std::vector<ncclComm_t> comms(2); float* b[2]; cudaStream_t s[2];
  ncclGroupStart();
  for (int d = 0; d < 2; ++d) { cudaSetDevice(d); ncclCommInitRank(&comms[d], 2, id, d); }
  ncclGroupEnd();
  for (int d = 0; d < 2; ++d) cudaMalloc(&b[d], 64);
  for (int d = 0; d < 2; ++d) ncclAllReduce(b[d], b[d], 8, ncclFloat, ncclSum, comms[d], s[d]); }
"""
    assert analyze(_HEAD + code, "t.cu").launch_model == "single-process"
    ungrouped = code.replace("ncclGroupStart();", "").replace("ncclGroupEnd();", "")
    assert analyze(_HEAD + ungrouped, "t.cu").launch_model == "process-per-gpu"


def test_an_object_whose_class_is_defined_elsewhere_is_refused_with_that_reason():
    a = analyze(_HEAD + '#include "buffers.h"\nint main() { ncclComm_t comm; cudaStream_t s; DeviceBuffer g(8);\n'
                "  ncclAllReduce(g.data(), g.data(), 8, ncclFloat, ncclSum, comm, s); }\n", "t.cu")
    msgs = [p.message for p in plan(a).problems]
    assert msgs and "owned by an object whose allocation is not in this file" in msgs[0]
    assert "define the buffer class in this file" in msgs[0]
