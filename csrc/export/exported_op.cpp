// A verified candidate as an operation inside someone else's job (cuco.export): one rank's communicator,
// the workload's buffers (symmetric where the workload says so, registered as NCCL windows), the candidate's
// workspaces and device communicator, and a launch on the caller's stream with the side stream joined back.
// The same setup as the harness's Rank (csrc/harness/rank_setup.cpp), without inputs, checks or timing: the
// caller owns those.

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cuco/abi.h"
#include "cuco/export.h"
#include "../harness/hexcode.h"

struct cuco_op {
  void* plugin = nullptr;
  void* candidate = nullptr;
  cuco_candidate_launch_fn launch = nullptr;
  cuco_candidate_teardown_fn teardown = nullptr;
  cuco_workload_desc desc{};
  cuco_ctx ctx{};
  void* workspace = nullptr;
  void* symmetric = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  bool set_up = false;
  bool workload_set_up = false;
};

namespace {

thread_local std::string g_error;

int fail(const std::string& why) {
  g_error = why;
  return 1;
}

#define OP_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) return fail(std::string(#x) + ": " + cudaGetErrorString(e_)); } while (0)
#define OP_NCCL(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) return fail(std::string(#x) + ": " + ncclGetErrorString(r_)); } while (0)

template <typename F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

int open_libraries(cuco_op* op, const char* plugin_so, const char* candidate_so) {
  op->plugin = dlopen(plugin_so, RTLD_NOW | RTLD_LOCAL);
  if (!op->plugin) return fail(std::string("cannot load the workload plugin: ") + dlerror());
  op->candidate = dlopen(candidate_so, RTLD_NOW | RTLD_LOCAL);
  if (!op->candidate) return fail(std::string("cannot load the candidate: ") + dlerror());
  op->launch = symbol<cuco_candidate_launch_fn>(op->candidate, "cuco_candidate_launch");
  op->teardown = symbol<cuco_candidate_teardown_fn>(op->candidate, "cuco_candidate_teardown");
  if (!op->launch) return fail("the candidate defines no cuco_candidate_launch");
  return 0;
}

int describe(cuco_op* op, const int64_t* dims, int ndims, int world) {
  auto fn = symbol<cuco_workload_describe_fn>(op->plugin, "cuco_workload_describe");
  if (!fn) return fail("the workload plugin defines no cuco_workload_describe");
  if (fn(dims, ndims, world, &op->desc) != 0) return fail(std::string("the workload rejects the shape: ") + op->desc.error);
  return 0;
}

int alloc_buffers(cuco_op* op) {
  cuco_ctx& c = op->ctx;
  c.nbuffers = op->desc.nbuffers;
  for (int i = 0; i < c.nbuffers; ++i) {
    const cuco_buffer_spec& s = op->desc.buffers[i];
    cuco_buffer& b = c.buffers[i];
    b.bytes = s.bytes;
    if (s.bytes == 0) continue;
    if (s.symmetric) {
      OP_NCCL(ncclMemAlloc(&b.ptr, s.bytes));
      OP_NCCL(ncclCommWindowRegister(c.comm, b.ptr, s.bytes, &b.window, NCCL_WIN_COLL_SYMMETRIC));  // collective
    } else {
      OP_CUDA(cudaMalloc(&b.ptr, s.bytes));
    }
    OP_CUDA(cudaMemset(b.ptr, 0, s.bytes));
  }
  return 0;
}

int set_up_candidate(cuco_op* op) {
  cuco_ctx& c = op->ctx;
  cuco_requirements req{};
  auto requirements = symbol<cuco_candidate_requirements_fn>(op->candidate, "cuco_candidate_requirements");
  if (requirements && requirements(&c, &req) != 0) return fail("cuco_candidate_requirements failed");
  if (req.uses_nvshmem) return fail("NVSHMEM candidates are not exported yet; export an LSA point");
  if (req.gin_required) return fail("GIN candidates need an RDMA NIC; export an LSA point");
  if (req.workspace_bytes) {
    OP_CUDA(cudaMalloc(&op->workspace, req.workspace_bytes));
    OP_CUDA(cudaMemset(op->workspace, 0, req.workspace_bytes));
    c.workspace = op->workspace;
    c.workspace_bytes = req.workspace_bytes;
  }
  if (req.symmetric_workspace_bytes) {
    OP_NCCL(ncclMemAlloc(&op->symmetric, req.symmetric_workspace_bytes));
    OP_CUDA(cudaMemset(op->symmetric, 0, req.symmetric_workspace_bytes));
    c.symmetric_workspace.ptr = op->symmetric;
    c.symmetric_workspace.bytes = req.symmetric_workspace_bytes;
    OP_NCCL(ncclCommWindowRegister(c.comm, op->symmetric, req.symmetric_workspace_bytes,
                                   &c.symmetric_workspace.window, NCCL_WIN_COLL_SYMMETRIC));
  }
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements r;
  std::memset(&r, 0, sizeof r);
#endif
  r.lsaBarrierCount = req.lsa_barrier_count;
  OP_NCCL(ncclDevCommCreate(c.comm, &r, &c.devcomm));
  c.has_devcomm = 1;
  OP_CUDA(cudaDeviceSynchronize());
  auto setup = symbol<cuco_candidate_setup_fn>(op->candidate, "cuco_candidate_setup");
  if (setup && setup(&c) != 0) return fail("cuco_candidate_setup failed");
  op->set_up = true;
  return 0;
}

}  // namespace

extern "C" {

const char* cuco_op_error(void) { return g_error.c_str(); }

int cuco_op_unique_id(char* hex, size_t n) {
  ncclUniqueId id;
  OP_NCCL(ncclGetUniqueId(&id));
  std::string s = cuco_harness::to_hex(&id, sizeof id);
  if (n < s.size() + 1) return fail("unique id buffer too small");
  std::memcpy(hex, s.c_str(), s.size() + 1);
  return 0;
}

int cuco_op_open(const char* plugin_so, const char* candidate_so, const int64_t* dims, int ndims, int rank,
                 int world, const char* unique_id_hex, int device, cuco_op** out) {
  *out = nullptr;
  if (ndims < 1 || ndims > CUCO_MAX_DIMS) return fail("ndims out of range");
  cuco_op* op = new cuco_op();
  *out = op;
  cuco_ctx& c = op->ctx;
  c.abi_version = CUCO_ABI_VERSION;
  c.rank = rank;
  c.world = world;
  c.local_rank = rank;
  c.local_world = world;
  c.device = device;
  c.ndims = ndims;
  for (int i = 0; i < ndims; ++i) c.dims[i] = dims[i];
  if (open_libraries(op, plugin_so, candidate_so) || describe(op, dims, ndims, world)) return 1;
  OP_CUDA(cudaSetDevice(device));
  OP_CUDA(cudaDeviceGetAttribute(&c.sm_count, cudaDevAttrMultiProcessorCount, device));
  ncclUniqueId id;
  if (!unique_id_hex || !cuco_harness::from_hex(unique_id_hex, &id, sizeof id))
    return fail("the NCCL unique id is not 256 hex digits");
  OP_NCCL(ncclCommInitRank(&c.comm, world, id, rank));
  int least = 0, greatest = 0;
  OP_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  OP_CUDA(cudaStreamCreateWithPriority(&c.side_stream, cudaStreamNonBlocking, greatest));
  OP_CUDA(cudaEventCreateWithFlags(&op->fork, cudaEventDisableTiming));
  OP_CUDA(cudaEventCreateWithFlags(&op->join, cudaEventDisableTiming));
  if (alloc_buffers(op) || set_up_candidate(op)) return 1;
  return 0;
}

int cuco_op_fill_inputs(cuco_op* op, uint64_t seed, cudaStream_t stream) {
  cuco_ctx& c = op->ctx;
  c.stream = stream;
  if (!op->workload_set_up) {
    auto setup = symbol<cuco_workload_setup_fn>(op->plugin, "cuco_workload_setup");
    if (setup && setup(&c) != 0) return fail("cuco_workload_setup failed");
    op->workload_set_up = true;
  }
  auto fill = symbol<cuco_workload_fill_fn>(op->plugin, "cuco_workload_fill");
  if (!fill) return fail("the workload plugin defines no cuco_workload_fill");
  if (fill(&c, seed) != 0) return fail("cuco_workload_fill failed");
  OP_CUDA(cudaGetLastError());
  return 0;
}

int cuco_op_nbuffers(const cuco_op* op) { return op->ctx.nbuffers; }

int cuco_op_buffer(const cuco_op* op, int i, void** ptr, size_t* bytes, int* role, int* symmetric, const char** name) {
  if (i < 0 || i >= op->ctx.nbuffers) return fail("buffer index out of range");
  *ptr = op->ctx.buffers[i].ptr;
  *bytes = op->ctx.buffers[i].bytes;
  *role = op->desc.buffers[i].role;
  *symmetric = op->desc.buffers[i].symmetric;
  *name = op->desc.buffers[i].name;
  return 0;
}

int cuco_op_launch(cuco_op* op, cudaStream_t stream) {
  cuco_ctx& c = op->ctx;
  c.stream = stream;
  ++c.iteration;
  OP_CUDA(cudaEventRecord(op->fork, stream));
  OP_CUDA(cudaStreamWaitEvent(c.side_stream, op->fork, 0));
  int rc = op->launch(&c);
  if (rc != 0) return fail("cuco_candidate_launch returned " + std::to_string(rc));
  OP_CUDA(cudaEventRecord(op->join, c.side_stream));
  OP_CUDA(cudaStreamWaitEvent(stream, op->join, 0));
  OP_CUDA(cudaGetLastError());
  return 0;
}

int cuco_op_close(cuco_op* op) {
  if (!op) return 0;
  cuco_ctx& c = op->ctx;
  int rc = 0;
  if (c.comm) cudaDeviceSynchronize();
  if (op->set_up && op->teardown) rc |= op->teardown(&c);
  if (op->workload_set_up) {
    auto teardown = symbol<cuco_workload_teardown_fn>(op->plugin, "cuco_workload_teardown");
    if (teardown) rc |= teardown(&c);
  }
  if (c.has_devcomm) rc |= ncclDevCommDestroy(c.comm, &c.devcomm) != ncclSuccess;
  if (c.symmetric_workspace.window) rc |= ncclCommWindowDeregister(c.comm, c.symmetric_workspace.window) != ncclSuccess;
  if (op->symmetric) rc |= ncclMemFree(op->symmetric) != ncclSuccess;
  if (op->workspace) rc |= cudaFree(op->workspace) != cudaSuccess;
  for (int i = 0; i < c.nbuffers; ++i) {
    cuco_buffer& b = c.buffers[i];
    if (!b.ptr) continue;
    if (b.window) {
      rc |= ncclCommWindowDeregister(c.comm, b.window) != ncclSuccess;
      rc |= ncclMemFree(b.ptr) != ncclSuccess;
    } else {
      rc |= cudaFree(b.ptr) != cudaSuccess;
    }
  }
  if (op->fork) cudaEventDestroy(op->fork);
  if (op->join) cudaEventDestroy(op->join);
  if (c.side_stream) cudaStreamDestroy(c.side_stream);
  if (c.comm) rc |= ncclCommDestroy(c.comm) != ncclSuccess;
  // the candidate and plugin stay loaded: their kernels may be referenced by CUDA graphs the caller still holds
  delete op;
  return rc ? fail("releasing the operation's resources failed") : 0;
}

}  // extern "C"
