// Error checking for the harness: every CUDA/NCCL call is checked, failures carry file:line and say
// whether the CUDA context is poisoned ("sticky": illegal address, launch failure, ...), which decides
// between "crash" (process must end) and "error" (the run of one candidate fails, the process goes on).
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>
#include <nccl.h>

namespace cuco_harness {

class HarnessError : public std::runtime_error {
 public:
  HarnessError(const std::string& what, bool sticky) : std::runtime_error(what), sticky_(sticky) {}
  bool sticky() const { return sticky_; }

 private:
  bool sticky_;
};

// Errors after which every later CUDA call on the context fails: the process must be abandoned.
inline bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

inline std::string where(const char* file, int line) {
  std::string f(file);
  size_t slash = f.find_last_of('/');
  return (slash == std::string::npos ? f : f.substr(slash + 1)) + ":" + std::to_string(line);
}

[[noreturn]] inline void throw_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  throw HarnessError(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " +
                         expr + " at " + where(file, line),
                     is_sticky(e));
}

[[noreturn]] inline void throw_nccl(ncclResult_t r, const char* expr, const char* file, int line) {
  // An NCCL call that failed because CUDA failed underneath reports the CUDA state as well.
  cudaError_t pending = cudaPeekAtLastError();
  std::string msg = std::string("NCCL error ") + ncclGetErrorString(r) + " in " + expr + " at " + where(file, line);
  const char* last = ncclGetLastError(nullptr);
  if (last && *last) msg += ": " + std::string(last);
  if (pending != cudaSuccess) msg += std::string(" [CUDA ") + cudaGetErrorName(pending) + "]";
  throw HarnessError(msg, is_sticky(pending));
}

}  // namespace cuco_harness

#define CUCO_CK(expr)                                                                    \
  do {                                                                                   \
    cudaError_t cuco_e_ = (expr);                                                        \
    if (cuco_e_ != cudaSuccess) ::cuco_harness::throw_cuda(cuco_e_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUCO_NK(expr)                                                                    \
  do {                                                                                   \
    ncclResult_t cuco_r_ = (expr);                                                       \
    if (cuco_r_ != ncclSuccess) ::cuco_harness::throw_nccl(cuco_r_, #expr, __FILE__, __LINE__); \
  } while (0)

#define CUCO_FAIL(msg) throw ::cuco_harness::HarnessError(std::string(msg) + " at " + ::cuco_harness::where(__FILE__, __LINE__), false)
