// CUTLASS Hopper FMHA forward (examples/88_hopper_fmha of the nvidia-cutlass wheel) behind one plain function:
// bf16 Q/K/V, bf16 or fp32 O, fp32 accumulation, the natural-log log-sum-exp of every query row written out, causal
// or not, GQA through strides, head dims 32, 64 and 128. An fp32 O is for callers that merge partial results (a
// ring's steps): they round to bf16 once, after the last merge, not once per partial. RegisterOut takes O's type
// per call (Problem::o_bf16), so a caller that needs both pays for one instantiation.
//
// Use (in a compute library's .cu, compiled -arch=sm_90a -DNDEBUG --expt-relaxed-constexpr with the `cutlass`
// library; -DNDEBUG matters: device asserts become calls and serialise wgmma):
//
//   #include "cuco/kit/compute/fmha_hopper.cuh"
//   cuco::kit::fmha::Problem p{};            // pointers, sizes and strides below
//   int status = cuco::kit::fmha::forward<128, /*causal=*/true>(p, stream);   // 0 = enqueued, bf16 O
//   p.o_bf16 = false;  // fp32 O (true: bf16), stored from registers
//   int status = cuco::kit::fmha::forward<128, true, cuco::kit::fmha::RegisterOut>(p, stream);
//   // the persistent scheduler (RegisterOut only), for a GPU the FMHA has to itself: see Persistent below
//   int status = cuco::kit::fmha::forward<64, true, cuco::kit::fmha::RegisterOut, cuco::kit::fmha::Persistent>(p, s);
//   // queries that are the last seq_q rows of a causal sequence of seq_k keys (bottom-right aligned mask)
//   int status = cuco::kit::fmha::forward_suffix<64, cuco::kit::fmha::RegisterOut>(p, s);
//
// Each forward<D, causal, Out, Schedule> is one template instantiation: about 5 s of nvcc on 2 cores for a
// cooperative one (benchmarks/results/attention_compute_build.log), about 12 s for a persistent one (ring
// attention's library took 118 s instead of 70 with four); instantiate only what is used.
//
// Layout (all strides in elements; the head dim is contiguous, stride 1):
//   q, o   [batch][seq_q][heads_q][D]  by default (token-major, "BSHD"); any layout whose strides are given below.
//   k, v   [batch][seq_k][heads_kv][D]
//   lse    fp32, lse[b * lse_batch_stride + h * lse_head_stride + i]  (contiguous along the query row index i)
// GQA: heads_q = G * heads_kv; query head h reads KV head h / G (heads of one group are adjacent, as in
// torch SDPA's enable_gqa and flash-attn). MHA is G = 1.
//
// Semantics: O = softmax(Q K^T / sqrt(D)) V per (batch, query head); lse = log(sum_j exp(q.k_j / sqrt(D))).
// causal: query i sees keys j <= i (top-left aligned; meant for seq_q == seq_k, which is required). A row with no
// visible key would get lse = +inf (CUTLASS's convention); causal square problems never have one.
// forward_suffix: query i sees keys j <= i + (seq_k - seq_q), the queries being the last seq_q tokens of a causal
// sequence whose keys 0..seq_k-1 are all given (bottom-right aligned, what a decoder's later tokens or a
// context-parallel rank's chunk of the sequence need); seq_k - seq_q >= 0 and a multiple of the KV tile.
//
// Requirements (else a nonzero status, nothing enqueued):
//   seq_k a multiple of the KV tile (128 rows at every head dim): no key-side residual masking;
//   seq_q a multiple of 8 (CUTLASS's 16-byte alignment check); every stride a multiple of 8 elements and every
//   pointer 16-byte aligned (TMA); strides and heads * seq products within int32; heads_q % heads_kv == 0;
//   batch >= 1.
// Status: 0 enqueued, 1 bad arguments (see above), 2 CUTLASS can_implement refused, 3 initialize failed (or the
//   kernel's shared-memory limit could not be set on this device), 4 launch failed, 5 a CUDA error was already
//   pending on this thread before the launch (someone else's: CUTLASS would report it as its own).
//
// Several GPUs in one process (threads of the harness, one process driving every GPU) are supported: the example's
// adapter raises the kernel's shared-memory limit once per process, but that limit is per device, so it is raised
// here once per device (else every device but the first refuses the launch).
//
// How GQA maps onto the example's (B, H) modes: per batch element one launch whose "B" mode is the group member g
// (K/V stride _0: a static zero stride, which cute drops from the TMA descriptor) and whose "H" mode is the KV head.
// batch > 1 is a loop of launches on `stream` (one per batch element).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"
// The example's headers sit beside include/ in the wheel (source/examples) and in a CUTLASS checkout alike.
#include "../examples/88_hopper_fmha/collective/fmha_fusion.hpp"
#include "../examples/88_hopper_fmha/device/device_universal.hpp"
#include "../examples/88_hopper_fmha/kernel/fmha_kernel_builder.hpp"

namespace cuco::kit::fmha {

/// One attention problem: pointers, sizes and element strides (see the layout notes above).
struct Problem {
  const void* q = nullptr;   // bf16
  const void* k = nullptr;   // bf16
  const void* v = nullptr;   // bf16
  void* o = nullptr;         // bf16, or as o_bf16 says (forward<D, causal, RegisterOut>)
  float* lse = nullptr;      // fp32
  int batch = 1, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0;
  int64_t q_seq_stride = 0, q_head_stride = 0, q_batch_stride = 0;
  int64_t k_seq_stride = 0, k_head_stride = 0, k_batch_stride = 0;
  int64_t v_seq_stride = 0, v_head_stride = 0, v_batch_stride = 0;
  int64_t o_seq_stride = 0, o_head_stride = 0, o_batch_stride = 0;
  int64_t lse_head_stride = 0, lse_batch_stride = 0;
  bool o_bf16 = false;       // forward<D, causal, RegisterOut> only: O is bf16, else fp32
};

/// O's element type for forward: taken per call from Problem::o_bf16 (bf16 or fp32), stored from registers.
struct RegisterOut {};

/// Token-major ("BSHD") dense strides for q/o [batch][seq_q][heads_q][D], k/v [batch][seq_k][heads_kv][D] and
/// lse [batch][heads_q][seq_q]; the caller sets the pointers and sizes first.
inline void set_dense_strides(Problem& p, int head_dim) {
  p.q_head_stride = p.o_head_stride = head_dim;
  p.q_seq_stride = p.o_seq_stride = int64_t(p.heads_q) * head_dim;
  p.q_batch_stride = p.o_batch_stride = p.q_seq_stride * p.seq_q;
  p.k_head_stride = p.v_head_stride = head_dim;
  p.k_seq_stride = p.v_seq_stride = int64_t(p.heads_kv) * head_dim;
  p.k_batch_stride = p.v_batch_stride = p.k_seq_stride * p.seq_k;
  p.lse_head_stride = p.seq_q;
  p.lse_batch_stride = int64_t(p.heads_q) * p.seq_q;
}

/// Tile (query rows, key rows, head dim) per head dim, cooperative warp-specialised: 128 x 128 at every head dim.
/// Chosen by measurement (benchmarks/probes/fmha_variants, results/w1/fmha_variants.md, H200): at D 32 and 64 the
/// 128-row KV tile runs 1.21-1.35x faster than the example's 64-row one (s8192-d64 causal 0.700 vs 0.862 ms).
template <int kHeadDim>
struct TileFor;
template <>
struct TileFor<32> { using type = cute::Shape<cute::_128, cute::_128, cute::_32>; };
template <>
struct TileFor<64> { using type = cute::Shape<cute::_128, cute::_128, cute::_64>; };
template <>
struct TileFor<128> { using type = cute::Shape<cute::_128, cute::_128, cute::_128>; };

/// The tile scheduler. Cooperative (the default): one CTA per output tile, each started as an SM frees up, so
/// CTAs held back by a communication kernel beside the FMHA only delay their own tile. Persistent: one CTA per SM
/// walks tiles dealt to it up front, with Q loaded by a warp of its own (example 88's ping-pong options), 3-9%
/// faster at head dims 32 and 64 alone (s8192-d64 causal 0.667 vs 0.693 ms, results/w1/fmha_variants.md), but a
/// CTA held back stalls its whole share: only for a GPU the FMHA has to itself (RegisterOut only).
struct Cooperative {};
struct Persistent {};

/// Rows of the KV tile for head dim D: seq_k must be a multiple of it.
template <int kHeadDim>
constexpr int kv_tile() { return cute::size<1>(typename TileFor<kHeadDim>::type{}); }

namespace detail {

using Element = cutlass::bfloat16_t;
using ProblemShape = cute::tuple<int, int, int, int, int>;                      // B H Q K D (B = group member)
using StrideQO = cute::tuple<int, cute::_1, cute::tuple<int, int>>;             // Q D (g, hkv)
using StrideKV = cute::tuple<int, cute::_1, cute::tuple<cute::_0, int>>;        // K D (g -> same head, hkv)
using StrideLSE = cute::tuple<cute::_1, cute::tuple<int, int>>;                 // Q (g, hkv)

template <bool kCausal>
using Fusion =
    std::conditional_t<kCausal, cutlass::fmha::collective::CausalFusion, cutlass::fmha::collective::DefaultFusion>;

/// The example's CausalFusion aligned bottom-right: query i of seq_q sees key j <= i + (seq_k - seq_q). With the
/// offset a multiple of the KV tile the diagonal of a query tile still falls in one KV tile, its last (the masked
/// one, as in CausalFusion); the KV tiles before it are unmasked and the ones after it are skipped.
struct CausalSuffixFusion : cutlass::fmha::collective::DefaultFusion {
  using Base = cutlass::fmha::collective::DefaultFusion;

  template <class ProblemSize>
  CUTLASS_DEVICE static int offset(ProblemSize const& problem_size) {
    return cute::get<3>(problem_size) - cute::get<2>(problem_size);
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_trip_count(BlkCoord const& blk_coord, TileShape const& tile_shape,
                                    ProblemSize const& problem_size) {
    const int max_blocks_k = Base::get_trip_count(blk_coord, tile_shape, problem_size);
    const int last_key = (cute::get<0>(blk_coord) + 1) * cute::get<0>(tile_shape) + offset(problem_size);
    return std::min(max_blocks_k, cute::ceil_div(last_key, cute::get<1>(tile_shape)));
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_masked_trip_count(BlkCoord const&, TileShape const& tile_shape, ProblemSize const&) {
    return cute::ceil_div(cute::get<0>(tile_shape), cute::get<1>(tile_shape));
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_unmasked_trip_count(BlkCoord const& blk_coord, TileShape const& tile_shape,
                                             ProblemSize const& problem_size) {
    return get_trip_count(blk_coord, tile_shape, problem_size) -
           get_masked_trip_count(blk_coord, tile_shape, problem_size);
  }

  template <class AccQK, class IndexQK, class ProblemSize>
  CUTLASS_DEVICE void before_softmax(AccQK& acc_qk, IndexQK const& index_qk, ProblemSize const& problem_size) {
    const int off = offset(problem_size);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < cute::size(acc_qk); i++) {
      auto pos = index_qk(i);
      if (cute::get<0>(pos) + off < cute::get<1>(pos)) acc_qk(i) = -INFINITY;
    }
  }
};

/// The example's forward epilogue (collective/fmha_epilogue.hpp, FmhaFwdEpilogue) with O's element type apart from
/// the inputs' (the example ties both to one type), and O stored from registers straight to global memory. Not the
/// example's TMA store through shared memory: in the example's non-persistent kernel the epilogue's shared memory
/// is a union with the mainloop's, and the first math warpgroup to finish stages its O tile there while the other
/// still reads its Q and the last K/V tiles. A bf16 tile fits in the finished warpgroup's own Q; an fp32 one did
/// not (D 32 and 64): it overwrote the other warpgroup's operands now and then, and rows came out NaN or wrong
/// (tests/test_workload_attention_cp_gpu.py, blocks of one KV tile). Each quad of threads stores 8 consecutive
/// floats of a row: whole 32-byte sectors. O is fp32 or bf16 as Arguments::o_bf16 says (RegisterOut: both stores in
/// one instantiation; the branch is uniform over the grid).
template <class TileShapeWG>
struct EpilogueOut {
  static constexpr int Alignment = 16 / sizeof(float);  // fp32, the wider of the two O types
  using StrideO = cute::tuple<int, cute::_1, cute::tuple<int, int>>;
  using StrideL = cute::tuple<cute::_1, cute::tuple<int, int>>;
  using Operation = cutlass::epilogue::fusion::LinearCombination<float, float, void>;
  // Only for the kernel's epilogue-load pipeline types, which it builds whatever the epilogue does; never run.
  using CollectiveEpilogueTMA = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShapeWG, cute::Shape<cute::_1, cute::_1, cute::_1>,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, StrideO, Alignment, float, StrideO,
      Alignment, cutlass::epilogue::TmaWarpSpecialized, Operation>::CollectiveOp;

  struct Arguments {
    float* ptr_O;  // the address of O whatever its type
    StrideO dO;
    float* ptr_LSE;
    StrideL dLSE;
    bool o_bf16 = false;
  };
  using Params = Arguments;
  struct TensorStorage {};  // no shared memory: nothing aliases the mainloop's
  using PipelineStorage = typename CollectiveEpilogueTMA::PipelineStorage;
  using LoadPipeline = typename CollectiveEpilogueTMA::LoadPipeline;
  static constexpr int TmaTransactionBytes = 0;

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void* = nullptr) {
    return args;
  }

  template <class TileShape, class BlkCoord, class ResultTuple, class TiledMma, class ProblemShape>
  CUTLASS_DEVICE void operator()(TileShape const& tile_shape, BlkCoord const& blk_coord, ResultTuple const& result,
                                 TiledMma const& tiled_mma, ProblemShape const& problem_size, Params const& params,
                                 LoadPipeline, TensorStorage&) {
    using namespace cute;
    using X = Underscore;
    auto acc = get<0>(result);
    auto lse = get<1>(result);
    auto thr_mma = tiled_mma.get_thread_slice(threadIdx.x);
    const int seq_q = get<2>(problem_size);
    auto batch_heads = make_shape(get<0>(problem_size), get<1>(problem_size));
    const int row0 = get<0>(blk_coord) * get<0>(tile_shape);
    Tensor cO = make_identity_tensor(take<0, 2>(tile_shape));
    Tensor tOcO = thr_mma.partition_C(cO);
    // LSE: one thread per row (the example's)
    Tensor mLSE = make_tensor(make_gmem_ptr(params.ptr_LSE), make_shape(seq_q, get<1>(tile_shape), batch_heads),
                              make_stride(_1{}, _0{}, get<1>(params.dLSE)));
    Tensor gLSE = local_tile(mLSE, tile_shape, make_coord(_, _, _), Step<_1, _1, X>{})(
        _, _, get<0>(blk_coord), get<1>(blk_coord), get<2>(blk_coord));
    Tensor tOgLSE = thr_mma.partition_C(gLSE);
    if (get<1>(tOcO(_0{})) == 0) {
      auto tOgLSE_mn = make_tensor(tOgLSE.data(), cutlass::fmha::collective::layout_acc_mn(tiled_mma,
                                                                                            tOgLSE.layout()));
      auto tOcO_mn = make_tensor(tOcO.data(), cutlass::fmha::collective::layout_acc_mn(tiled_mma, tOcO.layout()));
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size<0>(tOgLSE_mn); i++)
        if (get<0>(tOcO_mn(i)) + row0 < seq_q) tOgLSE_mn(i, _0{}) = lse(i);
    }
    if (params.o_bf16)
      store_o(reinterpret_cast<cutlass::bfloat16_t*>(params.ptr_O), tile_shape, blk_coord, acc, thr_mma, tOcO, row0,
              seq_q, problem_size, params.dO);
    else
      store_o(params.ptr_O, tile_shape, blk_coord, acc, thr_mma, tOcO, row0, seq_q, problem_size, params.dO);
  }

  // O: each accumulator element to its place in T, rows past seq_q left alone
  template <class T, class TileShape, class BlkCoord, class Acc, class ThrMma, class CoordTensor, class ProblemShape>
  CUTLASS_DEVICE static void store_o(T* ptr, TileShape const& tile_shape, BlkCoord const& blk_coord, Acc const& acc,
                                     ThrMma const& thr_mma, CoordTensor const& tOcO, int row0, int seq_q,
                                     ProblemShape const& problem_size, StrideO const& dO) {
    using namespace cute;
    using X = Underscore;
    auto batch_heads = make_shape(get<0>(problem_size), get<1>(problem_size));
    Tensor mO = make_tensor(make_gmem_ptr(ptr), make_shape(seq_q, get<4>(problem_size), batch_heads), dO);
    Tensor gO = local_tile(mO, tile_shape, make_coord(_, _, _), Step<_1, _1, X>{})(
        _, _, get<0>(blk_coord), _0{}, get<2>(blk_coord));
    Tensor tOgO = thr_mma.partition_C(gO);
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < size(acc); i++)
      if (get<0>(tOcO(i)) + row0 < seq_q) tOgO(i) = static_cast<T>(acc(i));
  }
};

/// RegisterOut: the example's mainloop and kernel with EpilogueOut, cooperative or persistent. bf16 O: the
/// example's builder as it is (cooperative).
template <class Schedule, class... Opts>
struct RegisterOutKernel {
  template <int kHeadDim, class Mask>
  using Mainloop = cutlass::fmha::collective::FmhaMainloopTmaWarpSpecialized<
      Element, float, float, typename TileFor<kHeadDim>::type, StrideQO, StrideKV, StrideKV, Mask, Opts...>;
  // the kernel around a mainloop: the example's, or one derived from it (fmha_arrival.cuh)
  template <class MainloopT>
  using KernelOf = cutlass::fmha::kernel::FmhaKernelTmaWarpSpecialized<
      MainloopT, EpilogueOut<typename MainloopT::TileShapePV>, Schedule, Opts...>;
  template <int kHeadDim, class Mask>
  using Kernel = KernelOf<Mainloop<kHeadDim, Mask>>;
};
using CooperativeKernel = RegisterOutKernel<cutlass::fmha::kernel::IndividualTileScheduler>;
using PersistentKernel = RegisterOutKernel<
    cutlass::fmha::kernel::PersistentTileScheduler,
    cutlass::fmha::kernel::Option<cutlass::fmha::kernel::Tag::kIsPersistent, cute::true_type>,
    cutlass::fmha::kernel::Option<cutlass::fmha::kernel::Tag::kLoadsQSeparately, cute::true_type>>;

// Mask: the example's DefaultFusion or CausalFusion (Fusion<kCausal>), or CausalSuffixFusion.
template <int kHeadDim, class Mask, class ElementOut, class Schedule>
struct OpFor {
  static_assert(std::is_same_v<ElementOut, RegisterOut>, "O is bf16 (the example's epilogue) or RegisterOut");
  static_assert(std::is_same_v<Schedule, Cooperative> || std::is_same_v<Schedule, Persistent>,
                "the schedule is Cooperative or Persistent");
  using Kernel = typename std::conditional_t<std::is_same_v<Schedule, Persistent>, PersistentKernel,
                                             CooperativeKernel>::template Kernel<kHeadDim, Mask>;
};
template <int kHeadDim, class Mask, class Schedule>
struct OpFor<kHeadDim, Mask, Element, Schedule> {
  static_assert(std::is_same_v<Schedule, Cooperative>, "a persistent FMHA stores O from registers: RegisterOut");
  using Kernel = typename cutlass::fmha::kernel::FmhaBuilder<
      Element, float, float, typename TileFor<kHeadDim>::type, StrideQO, StrideKV, StrideKV, Mask,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::Kernel;
};
template <int kHeadDim, class Mask, class ElementOut = Element, class Schedule = Cooperative>
using Op = cutlass::device::Universal<typename OpFor<kHeadDim, Mask, ElementOut, Schedule>::Kernel>;

inline bool fits_int(int64_t x) { return x >= 0 && x <= INT32_MAX; }

inline bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

/// Raise `Kernel`'s dynamic shared-memory limit on the current device, once per device; false if CUDA refused.
template <class Kernel>
bool smem_limit_set_here() {
  static std::atomic<uint64_t> devices_done{0};  // bit d: device d has the limit (devices >= 64: every call)
  constexpr int smem = Kernel::SharedStorageSize;
  if (smem < (48 << 10)) return true;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
  if (bit && (devices_done.load(std::memory_order_acquire) & bit)) return true;
  if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
      cudaSuccess) {
    (void)cudaGetLastError();  // clear it: the caller reports status 3
    return false;
  }
  devices_done.fetch_or(bit, std::memory_order_acq_rel);
  return true;
}

}  // namespace detail

/// Check `p` against the requirements above for head dim D (suffix: forward_suffix's); 0 when it can run, else 1.
template <int kHeadDim, bool kCausal, bool kSuffix = false>
int check(const Problem& p) {
  using detail::fits_int;
  if (p.batch < 1 || p.heads_q < 1 || p.heads_kv < 1 || p.seq_q < 1 || p.seq_k < 1) return 1;
  if (p.heads_q % p.heads_kv != 0 || p.seq_k % kv_tile<kHeadDim>() != 0 || p.seq_q % 8 != 0) return 1;
  if (kCausal && p.seq_q != p.seq_k) return 1;
  if (kSuffix && (p.seq_k < p.seq_q || (p.seq_k - p.seq_q) % kv_tile<kHeadDim>() != 0)) return 1;
  if (!p.q || !p.k || !p.v || !p.o || !p.lse) return 1;
  if (!detail::aligned(p.q) || !detail::aligned(p.k) || !detail::aligned(p.v) || !detail::aligned(p.o)) return 1;
  const int64_t strides[] = {p.q_seq_stride, p.q_head_stride, p.k_seq_stride, p.k_head_stride, p.v_seq_stride,
                             p.v_head_stride, p.o_seq_stride, p.o_head_stride};
  const int group = p.heads_q / p.heads_kv;
  for (int64_t s : strides)
    if (s % 8 != 0 || !fits_int(s * group)) return 1;
  if ((p.q_batch_stride | p.k_batch_stride | p.v_batch_stride | p.o_batch_stride) % 8 != 0) return 1;
  if (!fits_int(p.lse_head_stride * p.heads_q) || p.lse_head_stride < 0) return 1;
  return 0;
}

namespace detail {

/// Sets nothing beyond the example's mainloop arguments.
struct NoExtra {
  template <class MainloopArguments>
  void operator()(MainloopArguments&) const {}
};

/// forward's body for the device op `O` (p already checked). sm_count: the persistent scheduler's grid (0: every SM
/// of the device; at most that). set_extra: fills what a derived mainloop adds to the example's arguments.
template <class O, class ElementOut, class Schedule, class SetExtra = NoExtra>
int run_op(const Problem& p, cudaStream_t stream, int sm_count = 0, SetExtra set_extra = {}) {
  using namespace cute;
  static_assert(O::Kernel::SharedStorageSize <= 227 * 1024, "the FMHA's shared memory exceeds an H100 SM's 227 KiB");
  const int group = p.heads_q / p.heads_kv;
  // Query head h = hkv * G + g: g moves by one head, hkv by G heads; K/V ignore g (static zero stride).
  detail::StrideQO sQ = make_stride(int(p.q_seq_stride), _1{}, make_stride(int(p.q_head_stride),
                                                                           int(p.q_head_stride * group)));
  detail::StrideKV sK = make_stride(int(p.k_seq_stride), _1{}, make_stride(_0{}, int(p.k_head_stride)));
  detail::StrideKV sV = make_stride(int(p.v_seq_stride), _1{}, make_stride(_0{}, int(p.v_head_stride)));
  detail::StrideQO sO = make_stride(int(p.o_seq_stride), _1{}, make_stride(int(p.o_head_stride),
                                                                           int(p.o_head_stride * group)));
  detail::StrideLSE sL = make_stride(_1{}, make_stride(int(p.lse_head_stride), int(p.lse_head_stride * group)));
  constexpr int kHeadDim = cute::size<2>(typename O::Kernel::TileShape{});  // the tile spans the head dim
  cutlass::KernelHardwareInfo hw;  // only the persistent scheduler reads it (its grid: one CTA per SM)
  if constexpr (std::is_same_v<Schedule, Persistent>) {
    if (cudaGetDevice(&hw.device_id) != cudaSuccess) return 5;
    hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(hw.device_id);
    if (sm_count > 0 && sm_count < hw.sm_count) hw.sm_count = sm_count;
  }
  for (int b = 0; b < p.batch; ++b) {
    const Element* q = static_cast<const Element*>(p.q) + b * p.q_batch_stride;
    const Element* k = static_cast<const Element*>(p.k) + b * p.k_batch_stride;
    const Element* v = static_cast<const Element*>(p.v) + b * p.v_batch_stride;
    float* lse = p.lse + b * p.lse_batch_stride;
    typename O::Arguments args{};
    args.problem_size = detail::ProblemShape{group, p.heads_kv, p.seq_q, p.seq_k, kHeadDim};
    args.mainloop.ptr_Q = q, args.mainloop.dQ = sQ;
    args.mainloop.ptr_K = k, args.mainloop.dK = sK;
    args.mainloop.ptr_V = v, args.mainloop.dV = sV;
    set_extra(args.mainloop);
    args.hw_info = hw;
    if constexpr (std::is_same_v<ElementOut, RegisterOut>) {
      char* o = static_cast<char*>(p.o) + b * p.o_batch_stride * (p.o_bf16 ? 2 : 4);
      args.epilogue = {reinterpret_cast<float*>(o), sO, lse, sL, p.o_bf16};
    } else {
      args.epilogue = {static_cast<Element*>(p.o) + b * p.o_batch_stride, sO, lse, sL};
    }
    O op;
    if (op.can_implement(args) != cutlass::Status::kSuccess) return 2;
    if (op.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return 3;
    if (!detail::smem_limit_set_here<typename O::Kernel>()) return 3;
    if (cudaPeekAtLastError() != cudaSuccess) return 5;
    if (op.run(stream) != cutlass::Status::kSuccess) return 4;
  }
  return 0;
}

/// run_op for head dim D and mask `Mask` with the example's mainloop.
template <int kHeadDim, class Mask, class ElementOut, class Schedule>
int run(const Problem& p, cudaStream_t stream) {
  return run_op<Op<kHeadDim, Mask, ElementOut, Schedule>, ElementOut, Schedule>(p, stream);
}

}  // namespace detail

/// Enqueue O, LSE = attention(Q, K, V) on `stream`, O bf16 (ElementOut bf16) or as p.o_bf16 says (RegisterOut),
/// with the Cooperative or the Persistent tile scheduler; returns the status described at the top of this file.
template <int kHeadDim, bool kCausal, class ElementOut = cutlass::bfloat16_t, class Schedule = Cooperative>
int forward(const Problem& p, cudaStream_t stream) {
  if (int bad = check<kHeadDim, kCausal>(p)) return bad;
  return detail::run<kHeadDim, detail::Fusion<kCausal>, ElementOut, Schedule>(p, stream);
}

/// The same with the causal mask aligned bottom-right: the queries are the last seq_q tokens of a causal sequence
/// whose seq_k keys are all given (seq_k - seq_q >= 0, a multiple of the KV tile; see the top of this file).
template <int kHeadDim, class ElementOut = cutlass::bfloat16_t, class Schedule = Cooperative>
int forward_suffix(const Problem& p, cudaStream_t stream) {
  if (int bad = check<kHeadDim, false, true>(p)) return bad;
  return detail::run<kHeadDim, detail::CausalSuffixFusion, ElementOut, Schedule>(p, stream);
}

}  // namespace cuco::kit::fmha
