// Probe: CUTLASS's Hopper FMHA (examples/88_hopper_fmha of the nvidia-cutlass wheel) forward kernel instantiated
// for bf16, head dim 64, causal and not, with the log-sum-exp written out, behind a C function: the building block
// the ring-attention workload's compute library needs. Compiles without the example's runner (which needs curand).
//   nvcc -std=c++17 -arch=sm_90a -O3 -DNDEBUG --expt-relaxed-constexpr -I$CUTLASS/include -I$CUTLASS/tools/util/include \
//        -I$CUTLASS/examples/88_hopper_fmha -shared -Xcompiler -fPIC fmha_bf16_probe.cu -o libfmha_probe.so
#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
#include "collective/fmha_fusion.hpp"
#include "device/device_universal.hpp"
#include "kernel/fmha_kernel_builder.hpp"

using namespace cute;

namespace {

using Element = cutlass::bfloat16_t;
using ProblemShape = cute::tuple<int, int, int, int, int>;           // B H Q K D
using StrideQ = cute::tuple<int, _1, cute::tuple<int, int>>;          // Q D (B H)
using StrideK = cute::tuple<int, _1, cute::tuple<int, int>>;
using StrideV = cute::tuple<int, _1, cute::tuple<int, int>>;
using StrideO = cute::tuple<int, _1, cute::tuple<int, int>>;
using StrideLSE = cute::tuple<_1, cute::tuple<int, int>>;              // Q (B H)

template <class Fusion>
using Fwd = cutlass::device::Universal<typename cutlass::fmha::kernel::FmhaBuilder<
    Element, float, float, Shape<_128, _64, _64>, StrideQ, StrideK, StrideV, Fusion,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::Kernel>;

// Dense [B, H, S, D] row-major tensors (heads contiguous per batch), LSE [B, H, Sq] fp32.
template <class Fusion>
int run(const void* q, const void* k, const void* v, void* o, float* lse, int b, int h, int sq, int sk, void* workspace,
        size_t workspace_bytes, cudaStream_t stream) {
  using Op = Fwd<Fusion>;
  const int d = 64;
  StrideQ sQ = make_stride(d, _1{}, make_stride(h * sq * d, sq * d));
  StrideK sK = make_stride(d, _1{}, make_stride(h * sk * d, sk * d));
  StrideV sV = sK;
  StrideO sO = sQ;
  StrideLSE sL = make_stride(_1{}, make_stride(h * sq, sq));
  cutlass::KernelHardwareInfo hw;
  cudaGetDevice(&hw.device_id);
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
  typename Op::Arguments args{ProblemShape{b, h, sq, sk, d},
                              {(const Element*)q, sQ, (const Element*)k, sK, (const Element*)v, sV},
                              {(Element*)o, sO, lse, sL},
                              hw};
  Op op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return 1;
  if (Op::get_workspace_size(args) > workspace_bytes) return 2;
  if (op.initialize(args, workspace, stream) != cutlass::Status::kSuccess) return 3;
  return op.run(stream) == cutlass::Status::kSuccess ? 0 : 4;
}

}  // namespace

extern "C" int cuco_probe_fmha_bf16_d64(const void* q, const void* k, const void* v, void* o, float* lse, int b, int h,
                                        int sq, int sk, int causal, void* workspace, size_t workspace_bytes,
                                        cudaStream_t stream) {
  return causal ? run<cutlass::fmha::collective::CausalFusion>(q, k, v, o, lse, b, h, sq, sk, workspace,
                                                               workspace_bytes, stream)
                : run<cutlass::fmha::collective::DefaultFusion>(q, k, v, o, lse, b, h, sq, sk, workspace,
                                                                workspace_bytes, stream);
}
