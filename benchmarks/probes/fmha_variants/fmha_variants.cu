// Probe: the kit's CUTLASS Hopper FMHA (csrc/include/cuco/kit/compute/fmha_hopper.cuh) against other
// configurations of the same example-88 kernel on one attention problem, to choose the compute library's tile and
// schedule from measurements. One binary per head dim and mask (-DPROBE_D=64 -DPROBE_CAUSAL=1: each instantiation
// is ~20 s of nvcc, so a build holds only what one problem needs).
//
//   fmha_variants S HQ HKV [iters]      (D and the mask are the build's)
//
// Variants: `library` and `library_bf16` are cuco::kit::fmha::forward<D, causal, RegisterOut (fp32 O) / bf16> as
// the compute library calls them; the others are the same mainloop and fp32-O epilogue with another (query, key)
// tile or the persistent tile scheduler with a separate Q-loading warp (what example 88 calls "ping-pong"). Every
// variant's O and LSE are compared with `library`'s on the same inputs; one JSON line per variant on stdout.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuco/kit/compute/fmha_hopper.cuh"

#ifndef PROBE_D
#define PROBE_D 64
#endif
#ifndef PROBE_CAUSAL
#define PROBE_CAUSAL 1
#endif

namespace {

namespace fm = cuco::kit::fmha;
namespace dt = cuco::kit::fmha::detail;
using cute::_1;
using cute::_64;
using cute::_128;
constexpr int kD = PROBE_D;
constexpr bool kCausal = PROBE_CAUSAL != 0;
using HeadDim = cute::Int<kD>;

// The fp32-O kernel of fmha_hopper.cuh's OpFor with another tile and, when kPersistent, the options example 88's
// ping-pong builder adds (persistent tiles, Q loaded by its own warp).
template <class Tile, bool kPersistent>
struct VariantOp {
  using Persist = cutlass::fmha::kernel::Option<cutlass::fmha::kernel::Tag::kIsPersistent, cute::true_type>;
  using LoadQ = cutlass::fmha::kernel::Option<cutlass::fmha::kernel::Tag::kLoadsQSeparately, cute::true_type>;
  template <class... Opts>
  struct With {
    using Mainloop = cutlass::fmha::collective::FmhaMainloopTmaWarpSpecialized<
        dt::Element, float, float, Tile, dt::StrideQO, dt::StrideKV, dt::StrideKV, dt::Fusion<kCausal>, Opts...>;
    using Scheduler = std::conditional_t<kPersistent, cutlass::fmha::kernel::PersistentTileScheduler,
                                         cutlass::fmha::kernel::IndividualTileScheduler>;
    using Kernel = cutlass::fmha::kernel::FmhaKernelTmaWarpSpecialized<
        Mainloop, dt::EpilogueOut<typename Mainloop::TileShapePV>, Scheduler, Opts...>;
  };
  using Kernel = typename std::conditional_t<kPersistent, With<Persist, LoadQ>, With<>>::Kernel;
  using Op = cutlass::device::Universal<Kernel>;
};

// forward() of fmha_hopper.cuh for one variant, dense token-major layout, batch 1.
template <class Tile, bool kPersistent>
int forward_variant(fm::Problem p, cudaStream_t stream) {
  using namespace cute;
  using Op = typename VariantOp<Tile, kPersistent>::Op;
  if (p.seq_k % size<1>(Tile{}) != 0) return 1;
  const int group = p.heads_q / p.heads_kv;
  dt::StrideQO sQ = make_stride(int(p.q_seq_stride), _1{}, make_stride(int(p.q_head_stride),
                                                                      int(p.q_head_stride * group)));
  dt::StrideKV sK = make_stride(int(p.k_seq_stride), _1{}, make_stride(_0{}, int(p.k_head_stride)));
  dt::StrideKV sV = make_stride(int(p.v_seq_stride), _1{}, make_stride(_0{}, int(p.v_head_stride)));
  dt::StrideQO sO = make_stride(int(p.o_seq_stride), _1{}, make_stride(int(p.o_head_stride),
                                                                      int(p.o_head_stride * group)));
  dt::StrideLSE sL = make_stride(_1{}, make_stride(int(p.lse_head_stride), int(p.lse_head_stride * group)));
  cutlass::KernelHardwareInfo hw;
  cudaGetDevice(&hw.device_id);
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
  typename Op::Arguments args{dt::ProblemShape{group, p.heads_kv, p.seq_q, p.seq_k, kD},
                              {static_cast<const dt::Element*>(p.q), sQ, static_cast<const dt::Element*>(p.k), sK,
                               static_cast<const dt::Element*>(p.v), sV},
                              {static_cast<float*>(p.o), sO, p.lse, sL},
                              hw};
  Op op;
  if (op.can_implement(args) != cutlass::Status::kSuccess) return 2;
  if (op.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return 3;
  if (!dt::smem_limit_set_here<typename Op::Kernel>()) return 3;
  if (op.run(stream) != cutlass::Status::kSuccess) return 4;
  return 0;
}

using Forward = int (*)(fm::Problem, cudaStream_t);
struct Variant {
  const char* name;
  Forward run;
  bool bf16_out;
};

int library_f32(fm::Problem p, cudaStream_t s) { return fm::forward<kD, kCausal, fm::RegisterOut>(p, s); }
int library_bf16(fm::Problem p, cudaStream_t s) { return fm::forward<kD, kCausal>(p, s); }

std::vector<Variant> variants() {
  std::vector<Variant> v{{"library", library_f32, false}, {"library_bf16", library_bf16, true}};
  // the library's tile is 128 x 128 at every head dim: against it, the 64-row KV tile and the persistent scheduler
  v.push_back({"coop_128x64", forward_variant<cute::Shape<_128, _64, HeadDim>, false>, false});
  v.push_back({"persistent_128x128", forward_variant<cute::Shape<_128, _128, HeadDim>, true>, false});
  v.push_back({"persistent_128x64", forward_variant<cute::Shape<_128, _64, HeadDim>, true>, false});
  return v;
}

// Inputs uniform in [-sqrt(3), sqrt(3)) (unit variance) from a hash of the index: no curand needed.
__global__ void fill(__nv_bfloat16* x, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    x[i] = __float2bfloat16(((z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f);
  }
}

std::vector<float> o_as_float(const void* o, size_t n, bool bf16) {
  std::vector<float> out(n);
  if (bf16) {
    std::vector<__nv_bfloat16> h(n);
    cudaMemcpy(h.data(), o, n * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  } else {
    cudaMemcpy(out.data(), o, n * 4, cudaMemcpyDeviceToHost);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s S HQ HKV [iters]   (head dim %d, %s: this build's)\n", argv[0], kD,
            kCausal ? "causal" : "full");
    return 2;
  }
  const int S = atoi(argv[1]), HQ = atoi(argv[2]), HKV = atoi(argv[3]), iters = argc > 4 ? atoi(argv[4]) : 20;
  if (S <= 0 || HQ <= 0 || HKV <= 0 || HQ % HKV || S % 128 || iters <= 0) {
    fprintf(stderr, "S a positive multiple of 128, HKV dividing HQ, iters > 0: got %d %d %d %d\n", S, HQ, HKV, iters);
    return 2;
  }
  const size_t nq = (size_t)S * HQ * kD, nkv = (size_t)S * HKV * kD;
  void *q, *k, *v, *o;
  float* lse;
  if (cudaMalloc(&q, nq * 2) || cudaMalloc(&k, nkv * 2) || cudaMalloc(&v, nkv * 2) || cudaMalloc(&o, nq * 4) ||
      cudaMalloc(&lse, (size_t)HQ * S * 4)) {
    fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  fill<<<1024, 256>>>((__nv_bfloat16*)q, nq, 1);
  fill<<<1024, 256>>>((__nv_bfloat16*)k, nkv, 2);
  fill<<<1024, 256>>>((__nv_bfloat16*)v, nkv, 3);
  fm::Problem p{};
  p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse;
  p.batch = 1, p.heads_q = HQ, p.heads_kv = HKV, p.seq_q = S, p.seq_k = S;
  fm::set_dense_strides(p, kD);
  cudaStream_t st;
  cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  const double flops = 4.0 * S * (double)S * HQ * kD * (kCausal ? 0.5 : 1.0);
  std::vector<float> ref_o, ref_lse(HQ * (size_t)S), this_lse(HQ * (size_t)S);
  for (const Variant& var : variants()) {
    int rc = var.run(p, st);
    if (!rc) rc = cudaStreamSynchronize(st) == cudaSuccess ? 0 : 6;
    if (rc) {
      printf("{\"variant\": \"%s\", \"status\": %d}\n", var.name, rc);
      fflush(stdout);
      continue;
    }
    std::vector<float> out = o_as_float(o, nq, var.bf16_out);
    cudaMemcpy(this_lse.data(), lse, this_lse.size() * 4, cudaMemcpyDeviceToHost);
    if (ref_o.empty()) ref_o = out, ref_lse = this_lse;
    double max_ref = 0, max_diff = 0, max_lse_diff = 0;
    for (size_t i = 0; i < nq; ++i) {
      max_ref = std::max(max_ref, (double)fabsf(ref_o[i]));
      max_diff = std::max(max_diff, (double)fabsf(out[i] - ref_o[i]));
    }
    for (size_t i = 0; i < this_lse.size(); ++i)
      max_lse_diff = std::max(max_lse_diff, (double)fabsf(this_lse[i] - ref_lse[i]));
    for (int w = 0; w < 5; ++w) var.run(p, st);
    std::vector<float> per_launch;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(e0, st);
      for (int i = 0; i < iters; ++i) var.run(p, st);
      cudaEventRecord(e1, st);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      per_launch.push_back(ms / iters);
    }
    std::sort(per_launch.begin(), per_launch.end());
    const double med = per_launch[3];
    printf("{\"variant\": \"%s\", \"status\": 0, \"ms\": %.5f, \"spread\": %.4f, \"tflops\": %.1f, "
           "\"o_max_rel_diff\": %.3g, \"lse_max_diff\": %.3g, \"o_dtype\": \"%s\"}\n",
           var.name, med, (per_launch.back() - per_launch.front()) / med, flops / med / 1e9, max_diff / max_ref,
           max_lse_diff, var.bf16_out ? "bf16" : "fp32");
    fflush(stdout);
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
