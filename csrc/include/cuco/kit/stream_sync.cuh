// Stream-ordered epoch flags: a stream waits until a flag reaches an epoch, or raises it after its prior work.
// cuStreamWaitValue32 / cuStreamWriteValue32 hold no SM; where the driver lacks them a one-thread kernel does it.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuco/lsa.cuh"

namespace cuco {
namespace kit {

struct StreamOps {
  CUresult (*wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  CUresult (*write_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
};

// Resolve the driver entry points (setup only). Missing ones stay null: the kernel fallbacks are used.
inline void load_stream_ops(StreamOps* ops) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    ops->wait_value32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    ops->write_value32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
  (void)cudaGetLastError();
}

__global__ void wait_epoch_kernel(const uint32_t* flag, uint32_t e) {
  if (threadIdx.x == 0) cuco::lsa::wait_epoch(flag, e);
}

__global__ void set_epoch_kernel(uint32_t* flag, uint32_t e) {
  if (threadIdx.x == 0) cuco::lsa::store_release_sys(flag, e);
}

// Stream s waits until *flag (device memory) reaches epoch e. 0, or 62/63 on failure.
inline int stream_wait_epoch(const StreamOps& ops, cudaStream_t s, uint32_t* flag, uint32_t e) {
  if (ops.wait_value32)
    return ops.wait_value32((CUstream)s, (CUdeviceptr)flag, e, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS ? 0 : 62;
  wait_epoch_kernel<<<1, 32, 0, s>>>(flag, e);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

// *flag := e once the work before it on stream s is complete. 0, or 63/65 on failure.
inline int stream_set_epoch(const StreamOps& ops, cudaStream_t s, uint32_t* flag, uint32_t e) {
  if (ops.write_value32)
    return ops.write_value32((CUstream)s, (CUdeviceptr)flag, e, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS ? 0
                                                                                                             : 65;
  set_epoch_kernel<<<1, 32, 0, s>>>(flag, e);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

}  // namespace kit
}  // namespace cuco
