// Rank setup and teardown: device, communicator, streams, workload buffers, and a
// candidate's workspaces and device communicator.

#include <cstring>
#include <fstream>
#include <type_traits>
#include <utility>

#include "nvshmem_host.h"
#include "rank.h"

namespace cuco_harness {
namespace {

// GIN fields exist in ncclDevCommRequirements from NCCL 2.28.9 on (2.28.3 has none): detect the member
// instead of guessing the version, so the harness compiles against every 2.28+ header.
template <typename R, typename = void>
struct HasGinFields : std::false_type {};
template <typename R>
struct HasGinFields<R, std::void_t<decltype(std::declval<R&>().ginSignalCount)>> : std::true_type {};
constexpr bool kHeaderHasGin = HasGinFields<ncclDevCommRequirements>::value;

template <typename R>
void apply_gin(R& r, const cuco_requirements& q) {
  if constexpr (HasGinFields<R>::value) {
    r.ginSignalCount = q.gin_signal_count;
    r.ginCounterCount = q.gin_counter_count;
    if (q.gin_context_count > 0) r.ginContextCount = q.gin_context_count;
    if (q.gin_required) r.ginForceEnable = true;
  }
}

std::string version_text(int code) {
  // NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up to 2.8 and X*10000+Y*100+Z after.
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  int patch = code % 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::string driver_release() {
  // e.g. "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
  // the first token made of digits and dots, with at least one dot.
  std::ifstream f("/proc/driver/nvidia/version");
  std::string token;
  while (f >> token) {
    bool digits = !token.empty() && token.find('.') != std::string::npos;
    for (char ch : token) digits = digits && ((ch >= '0' && ch <= '9') || ch == '.');
    if (digits) return token;
  }
  return "";
}

}  // namespace

Rank::Rank(Shared& shared, LocalRank who) : s_(shared), me_(who) {}

DeviceInfo Rank::device_info() const {
  DeviceInfo d;
  cudaDeviceProp p{};
  CUCO_CK(cudaGetDeviceProperties(&p, me_.device));
  d.name = p.name;
  d.sm_count = p.multiProcessorCount;
  int v = 0;
  CUCO_CK(cudaDriverGetVersion(&v));
  d.driver_version = cuda_version_text(v);
  CUCO_CK(cudaRuntimeGetVersion(&v));
  d.cuda_runtime_version = cuda_version_text(v);
  CUCO_NK(ncclGetVersion(&v));
  d.nccl_version = version_text(v);
  d.nccl_header_version = version_text(NCCL_VERSION_CODE);
  d.driver_release = driver_release();
  return d;
}

void Rank::setup() {
  const Options& o = s_.opts;
  CUCO_CK(cudaSetDevice(me_.device));
  CUCO_CK(cudaFree(nullptr));  // create the context now, not inside a timed region
  if (records()) s_.report.set_device(device_info());
  ctx_.abi_version = CUCO_ABI_VERSION;
  ctx_.rank = me_.rank;
  ctx_.world = s_.launch.world;
  ctx_.local_rank = me_.local_rank;
  ctx_.local_world = s_.launch.local_world;
  ctx_.device = me_.device;
  CUCO_CK(cudaDeviceGetAttribute(&ctx_.sm_count, cudaDevAttrMultiProcessorCount, me_.device));
  ctx_.ndims = static_cast<int>(o.dims.size());
  for (size_t i = 0; i < o.dims.size(); ++i) ctx_.dims[i] = o.dims[i];

  CUCO_NK(ncclCommInitRank(&ctx_.comm, s_.launch.world, s_.launch.id, me_.rank));

  int least = 0, greatest = 0;
  CUCO_CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CUCO_CK(cudaStreamCreateWithPriority(&ctx_.stream, cudaStreamNonBlocking, least));
  CUCO_CK(cudaStreamCreateWithPriority(&ctx_.side_stream, cudaStreamNonBlocking, greatest));
  CUCO_CK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  CUCO_CK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  CUCO_CK(cudaEventCreate(&start_));
  CUCO_CK(cudaEventCreate(&stop_));

  const cuco_workload_desc& d = s_.desc;
  ctx_.nbuffers = d.nbuffers;
  for (int i = 0; i < d.nbuffers; ++i) {
    const cuco_buffer_spec& b = d.buffers[i];
    cuco_buffer& buf = ctx_.buffers[i];
    buf.bytes = b.bytes;
    if (b.bytes == 0) continue;
    if (b.symmetric) {
      CUCO_NK(ncclMemAlloc(&buf.ptr, b.bytes));
      // Collective: every rank registers its buffer of the same index in the same order.
      CUCO_NK(ncclCommWindowRegister(ctx_.comm, buf.ptr, b.bytes, &buf.window, NCCL_WIN_COLL_SYMMETRIC));
    } else {
      CUCO_CK(cudaMalloc(&buf.ptr, b.bytes));
    }
    CUCO_CK(cudaMemset(buf.ptr, 0, b.bytes));
  }
  CUCO_CK(cudaDeviceSynchronize());
  if (s_.workload.setup) {
    int rc = s_.workload.setup(&ctx_);
    if (rc != 0) CUCO_FAIL("cuco_workload_setup returned " + std::to_string(rc));
  }
  // Parts and benchmark-only runs see real inputs, not zeros.
  int rc = s_.workload.fill(&ctx_, o.seeds.front());
  if (rc != 0) CUCO_FAIL("cuco_workload_fill returned " + std::to_string(rc));
  CUCO_CK(cudaStreamSynchronize(ctx_.stream));
  CUCO_CK(cudaGetLastError());
}

void Rank::teardown() {
  if (s_.workload.teardown) s_.workload.teardown(&ctx_);
  CUCO_CK(cudaDeviceSynchronize());
  for (int i = 0; i < ctx_.nbuffers; ++i) {
    cuco_buffer& b = ctx_.buffers[i];
    if (!b.ptr) continue;
    if (b.window) {
      CUCO_NK(ncclCommWindowDeregister(ctx_.comm, b.window));
      CUCO_NK(ncclMemFree(b.ptr));
    } else {
      CUCO_CK(cudaFree(b.ptr));
    }
    b = cuco_buffer{};
  }
  for (cudaEvent_t e : {fork_, join_, start_, stop_})
    if (e) CUCO_CK(cudaEventDestroy(e));
  CUCO_CK(cudaStreamDestroy(ctx_.side_stream));
  CUCO_CK(cudaStreamDestroy(ctx_.stream));
  CUCO_NK(ncclCommDestroy(ctx_.comm));
}

void Rank::alloc_local(const cuco_requirements& req, CandidateResources& res) {
  if (req.workspace_bytes) {
    CUCO_CK(cudaMalloc(&res.workspace, req.workspace_bytes));
    CUCO_CK(cudaMemset(res.workspace, 0, req.workspace_bytes));
  }
  if (req.symmetric_workspace_bytes) {
    CUCO_NK(ncclMemAlloc(&res.symmetric, req.symmetric_workspace_bytes));
    CUCO_CK(cudaMemset(res.symmetric, 0, req.symmetric_workspace_bytes));
  }
  if (req.uses_nvshmem) res.nvshmem = NvshmemHost::instance().malloc(req.nvshmem_workspace_bytes);  // collective
  CUCO_CK(cudaDeviceSynchronize());
}

void Rank::register_symmetric(const cuco_requirements& req, CandidateResources& res) {
  if (!res.symmetric) return;
  CUCO_NK(ncclCommWindowRegister(ctx_.comm, res.symmetric, req.symmetric_workspace_bytes, &res.symmetric_window,
                                 NCCL_WIN_COLL_SYMMETRIC));
}

std::string Rank::gin_unavailable_reason() {
  if (!kHeaderHasGin)
    return "the NCCL " + version_text(NCCL_VERSION_CODE) +
           " headers the harness was built with have no GIN fields in ncclDevCommRequirements; rebuild against "
           "NCCL >= 2.28.9";
#ifdef NCCL_COMM_PROPERTIES_INITIALIZER
  ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  CUCO_NK(ncclCommQueryProperties(ctx_.comm, &props));
  if (props.ginType == NCCL_GIN_TYPE_NONE)
    return "NCCL reports no GIN support on this communicator (GIN needs an RDMA NIC; run GIN candidates on a "
           "multi-node cluster)";
#endif
  return "";
}

void Rank::create_devcomm(const cuco_requirements& req) {
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements r;
  std::memset(&r, 0, sizeof r);
#endif
  r.lsaBarrierCount = req.lsa_barrier_count;
  apply_gin(r, req);
  CUCO_NK(ncclDevCommCreate(ctx_.comm, &r, &ctx_.devcomm));
  ctx_.has_devcomm = 1;
}

void Rank::release(CandidateResources& res) {
  CUCO_CK(cudaDeviceSynchronize());
  if (ctx_.has_devcomm) {
    CUCO_NK(ncclDevCommDestroy(ctx_.comm, &ctx_.devcomm));
    ctx_.has_devcomm = 0;
    std::memset(&ctx_.devcomm, 0, sizeof ctx_.devcomm);
  }
  if (res.symmetric_window) CUCO_NK(ncclCommWindowDeregister(ctx_.comm, res.symmetric_window));
  if (res.symmetric) CUCO_NK(ncclMemFree(res.symmetric));
  if (res.workspace) CUCO_CK(cudaFree(res.workspace));
  NvshmemHost::instance().free(res.nvshmem);  // collective: every rank releases in the same order
  res = CandidateResources{};
  ctx_.nvshmem_workspace = nullptr;
  ctx_.nvshmem_workspace_bytes = 0;
  ctx_.nvshmem_attr = nullptr;
  ctx_.workspace = nullptr;
  ctx_.workspace_bytes = 0;
  ctx_.symmetric_workspace = cuco_buffer{};
  ctx_.candidate_state = nullptr;
}

}  // namespace cuco_harness
