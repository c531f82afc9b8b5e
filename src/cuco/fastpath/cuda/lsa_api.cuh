// cuco fast path: the drop-in replacements of the NCCL host calls (what a rewritten program calls), over
// the runtime in lsa_runtime.cuh (and lsa_copy.cuh for issuer=copy_engine).
#pragma once
#include "lsa_copy.cuh"

// ---- drop-in replacements -------------------------------------------------------------------------
template <class T>
static cudaError_t cucoSymAlloc(T** ptr, size_t bytes) {
  void* p = nullptr;
  ncclResult_t r = ncclMemAlloc(&p, bytes);
  if (r != ncclSuccess) { fprintf(stderr, "cuco fast path: ncclMemAlloc(%zu) failed: %s\n", bytes, ncclGetErrorString(r)); return cudaErrorMemoryAllocation; }
  int dev = 0;
  cudaGetDevice(&dev);
  {
    std::lock_guard<std::mutex> lock(cucofp::registry().mu);
    cucofp::registry().allocs.push_back(cucofp::Alloc{p, bytes, dev});
    ++cucofp::registry().generation;
  }
  *ptr = (T*)p;
  return cudaSuccess;
}
// The analysis over-approximates which pointers may be symmetric: a free of memory that is not symmetric
// falls back to the program's own call.
static inline cudaError_t cucoSymFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (!cucofp::isSym(ptr)) return cudaFree(ptr);
  return cucofp::freeSym(ptr) == ncclSuccess ? cudaSuccess : cudaErrorInvalidValue;
}
// Stream-ordered allocation becomes a symmetric allocation (peers must be able to map it); its free waits
// for the stream first, as cudaFreeAsync would order it.
template <class T>
static cudaError_t cucoSymAllocAsync(T** ptr, size_t bytes, cudaStream_t) { return cucoSymAlloc(ptr, bytes); }
static inline cudaError_t cucoSymFreeAsync(void* ptr, cudaStream_t st) {
  if (!ptr) return cudaSuccess;
  if (!cucofp::isSym(ptr)) return cudaFreeAsync(ptr, st);
  cudaError_t e = cudaStreamSynchronize(st);
  return e != cudaSuccess ? e : cucoSymFree(ptr);
}
// Make every stream that issued communication wait for it (placed by the transform before the first statement
// that depends on a transfer; nothing to do at placement=deferred).
static inline cudaError_t cucoJoin() {
  auto& uj = cucofp::unjoined();
  for (const auto& p : uj) {
    cudaError_t e = cudaStreamWaitEvent(p.first, p.second->done, 0);
    if (e != cudaSuccess) { uj.clear(); return e; }
  }
  uj.clear();
  return cudaSuccess;
}
static inline ncclResult_t cucoGroupStart() { ++cucofp::groupDepth(); return ncclSuccess; }
static inline ncclResult_t cucoGroupEnd() {
  if (cucofp::groupDepth() <= 0) CUCOFP_FAIL(ncclInvalidUsage, "cucoGroupEnd without cucoGroupStart");
  return --cucofp::groupDepth() == 0 ? cucofp::flush() : ncclSuccess;
}
// CUCOFP-STANDALONE-BEGIN: communicator lifetime belongs to the harness in candidate-ABI form
static inline ncclResult_t cucoCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  ncclResult_t r = ncclCommInitRank(comm, nranks, id, rank);
  if (r == ncclSuccess) cucofp::created().push_back(*comm);
  return r;
}
static inline ncclResult_t cucoCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                  ncclConfig_t* config) {
  ncclResult_t r = ncclCommInitRankConfig(comm, nranks, id, rank, config);
  if (r == ncclSuccess) cucofp::created().push_back(*comm);
  return r;
}
static inline ncclResult_t cucoCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclResult_t r = ncclCommInitAll(comms, ndev, devlist);
  if (r == ncclSuccess) for (int i = 0; i < ndev; ++i) cucofp::created().push_back(comms[i]);
  return r;
}
#ifdef CUCO_PROGRAM_OBSERVE_H
// Timed regions start after the one-time window setup (see prepareCreated).
static int cucofp_prepare_hook_set = (cuco_observe::prepare_hook() = [] { (void)cucofp::prepareCreated(); }, 0);
#endif
static inline ncclResult_t cucoCommDestroy(ncclComm_t comm) {
  ncclResult_t r = cucofp::release(comm);
  return r != ncclSuccess ? r : ncclCommDestroy(comm);
}
static inline ncclResult_t cucoCommFinalize(ncclComm_t comm) {
  ncclResult_t r = cucofp::release(comm);
  return r != ncclSuccess ? r : ncclCommFinalize(comm);
}
// CUCOFP-STANDALONE-END
static inline ncclResult_t cucoAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t dt,
                                         ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kAllGather, comm, st, send, recv, sendcount, dt, 0, 0, 0});
}
static inline ncclResult_t cucoAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t dt,
                                        ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kAlltoAll, comm, st, send, recv, count, dt, 0, 0, 0});
}
static inline ncclResult_t cucoReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t dt,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kReduceScatter, comm, st, send, recv, recvcount, dt, (int)op, 0, 0});
}
static inline ncclResult_t cucoAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dt,
                                         ncclRedOp_t op, ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kAllReduce, comm, st, send, recv, count, dt, (int)op, 0, 0});
}
static inline ncclResult_t cucoBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dt, int root,
                                         ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kBroadcast, comm, st, send, recv, count, dt, 0, root, 0});
}
static inline ncclResult_t cucoBcast(void* buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                                     cudaStream_t st) {
  return cucoBroadcast(buff, buff, count, dt, root, comm, st);
}
static inline ncclResult_t cucoSend(const void* send, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{-1, comm, st, send, nullptr, count, dt, 0, 0, peer});
}
static inline ncclResult_t cucoRecv(void* recv, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                                    cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{-2, comm, st, nullptr, recv, count, dt, 0, 0, peer});
}
static inline ncclResult_t cucoSymAllocNccl(void** ptr, size_t bytes) {
  return cucoSymAlloc(ptr, bytes) == cudaSuccess ? ncclSuccess : ncclSystemError;
}
static inline ncclResult_t cucoSymFreeNccl(void* ptr) { return cucofp::isSym(ptr) ? cucofp::freeSym(ptr) : ncclMemFree(ptr); }
static inline ncclResult_t cucoReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                      int root, ncclComm_t comm, cudaStream_t st) {
  return cucofp::enqueue(cucofp::Pending{cucofp::kReduce, comm, st, send, recv, count, dt, (int)op, root, 0});
}
