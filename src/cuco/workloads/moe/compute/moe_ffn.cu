// CUTLASS Hopper grouped GEMM (ptr-array, device-side problem sizes) for the MoE expert FFN; see moe_ffn.h.
//
// Both GEMMs are the same kernel type: A row-major [m x K], B given as [N x K] row-major (= column-major K x N),
// D row-major [m x N]; bf16 operands, fp32 accumulation, TMA warp-specialised cooperative mainloop and epilogue.
// The arguments (pointer/shape arrays in device memory) are bound once at plan creation; each call refreshes
// the arrays with one small kernel on the stream and then runs both GEMMs and the SwiGLU between them. The up GEMM's
// producer can wait for its rows to arrive (cuco/kit/compute/row_arrival.cuh; cuco_moe_ffn_run_arrival), which
// costs a null test per tile where nothing is awaited.
#include <stdio.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"

#include "cuco/kit/compute/row_arrival.cuh"
#include "moe_ffn.h"

using namespace cute;

namespace cuco_moe_ffn_impl {

using ProblemShape = cutlass::gemm::GroupProblemShape<Shape<int, int, int>>;
using Element = cutlass::bfloat16_t;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlign = 8;  // 16 bytes of bf16
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_1, _2, _1>;
using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;

using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto, float, float, Element, LayoutD*, kAlign, Element, LayoutD*,
    kAlign, EpilogueSchedule, cutlass::epilogue::fusion::LinearCombination<Element, float>>::CollectiveOp;

using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element, LayoutB*, kAlign, float,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
        sizeof(typename CollectiveEpilogue::SharedStorage))>,
    KernelSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
// The up GEMM: the same, its producer waiting for rows that are still arriving where the call says so
using UpMainloop = cuco::kit::ArrivalArrayMainloop<CollectiveMainloop>;
using UpGemm = cutlass::gemm::device::GemmUniversalAdapter<
    cutlass::gemm::kernel::GemmUniversal<ProblemShape, UpMainloop, CollectiveEpilogue>>;
using StrideA = typename Gemm::GemmKernel::InternalStrideA;
using StrideB = typename Gemm::GemmKernel::InternalStrideB;
using StrideC = typename Gemm::GemmKernel::InternalStrideC;
using StrideD = typename Gemm::GemmKernel::InternalStrideD;
using Shape3 = typename ProblemShape::UnderlyingProblemShape;

// Device arrays describing one grouped GEMM.
struct Arrays {
  Shape3* shapes = nullptr;
  const Element** a = nullptr;
  const Element** b = nullptr;
  Element** d = nullptr;
  StrideA* sa = nullptr;
  StrideB* sb = nullptr;
  StrideC* sc = nullptr;
  StrideD* sd = nullptr;
};

template <class G>
struct OneGemm {
  Arrays arr;
  G gemm;
  void* workspace = nullptr;
};

}  // namespace cuco_moe_ffn_impl

using namespace cuco_moe_ffn_impl;

struct cuco_moe_ffn {
  int max_groups = 0;
  int sms = 0;  // of the device the plan was made on
  int64_t H = 0, I = 0;
  OneGemm<UpGemm> up;    // [m x H] . w1^T -> [m x 2I]
  OneGemm<Gemm> down;    // [m x I] . w2^T -> [m x H]
  cuco::kit::RowArrival* arrival = nullptr;  // device: where the up GEMM's rows come from (this call's)
  int64_t* first_row = nullptr;              // device: each group's first row (the arrival's first_row)
};

namespace cuco_moe_ffn_impl {

#define FFN_CUDA(x)                                                                     \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "moe_ffn: %s: %s\n", #x, cudaGetErrorString(e_));                 \
      return 100 + (int)e_;                                                             \
    }                                                                                   \
  } while (0)

template <typename T>
int alloc(T** p, int n) {
  FFN_CUDA(cudaMalloc((void**)p, sizeof(T) * (size_t)n));
  return 0;
}

int alloc_arrays(Arrays* a, int n, int64_t N, int64_t K) {
  if (alloc(&a->shapes, n) || alloc(&a->a, n) || alloc(&a->b, n) || alloc(&a->d, n) || alloc(&a->sa, n) ||
      alloc(&a->sb, n) || alloc(&a->sc, n) || alloc(&a->sd, n))
    return 1;
  // Packed strides do not depend on a group's row count (one batch per group), so they are set once.
  StrideA sa = cutlass::make_cute_packed_stride(StrideA{}, {1, (int)K, 1});
  StrideB sb = cutlass::make_cute_packed_stride(StrideB{}, {(int)N, (int)K, 1});
  StrideC sc = cutlass::make_cute_packed_stride(StrideC{}, {1, (int)N, 1});
  StrideD sd = cutlass::make_cute_packed_stride(StrideD{}, {1, (int)N, 1});
  std::vector<StrideA> va(n, sa);
  std::vector<StrideB> vb(n, sb);
  std::vector<StrideC> vc(n, sc);
  std::vector<StrideD> vd(n, sd);
  FFN_CUDA(cudaMemcpy(a->sa, va.data(), sizeof(StrideA) * n, cudaMemcpyHostToDevice));
  FFN_CUDA(cudaMemcpy(a->sb, vb.data(), sizeof(StrideB) * n, cudaMemcpyHostToDevice));
  FFN_CUDA(cudaMemcpy(a->sc, vc.data(), sizeof(StrideC) * n, cudaMemcpyHostToDevice));
  FFN_CUDA(cudaMemcpy(a->sd, vd.data(), sizeof(StrideD) * n, cudaMemcpyHostToDevice));
  FFN_CUDA(cudaMemset(a->shapes, 0, sizeof(Shape3) * n));
  return 0;
}

void free_arrays(Arrays* a) {
  cudaFree(a->shapes);
  cudaFree(a->a);
  cudaFree(a->b);
  cudaFree(a->d);
  cudaFree(a->sa);
  cudaFree(a->sb);
  cudaFree(a->sc);
  cudaFree(a->sd);
}

// rows_in_order: raster along N, every N tile of a band of rows before the next band (CUTLASS's grouped default is
// along M); arrival: the up GEMM's (device memory), null for the down GEMM
template <class G>
int bind(OneGemm<G>* g, int n, int sm_count, int device, bool rows_in_order, const cuco::kit::RowArrival* arrival) {
  cutlass::KernelHardwareInfo hw;
  hw.device_id = device;
  hw.sm_count = sm_count;
  typename G::Arguments args;
  decltype(args.epilogue.thread) fusion;
  fusion.alpha = 1.0f;
  fusion.beta = 0.0f;  // no source: C is never read
  fusion.alpha_ptr = nullptr;
  fusion.beta_ptr = nullptr;
  fusion.alpha_ptr_array = nullptr;
  fusion.beta_ptr_array = nullptr;
  fusion.dAlpha = {cute::_0{}, cute::_0{}, 0};
  fusion.dBeta = {cute::_0{}, cute::_0{}, 0};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {n, g->arr.shapes, nullptr};
  args.mainloop.ptr_A = g->arr.a;
  args.mainloop.dA = g->arr.sa;
  args.mainloop.ptr_B = g->arr.b;
  args.mainloop.dB = g->arr.sb;
  if constexpr (std::is_same_v<G, UpGemm>) args.mainloop.arrival = arrival;
  args.epilogue = {fusion, (const Element**)g->arr.d, g->arr.sc, g->arr.d, g->arr.sd};
  args.hw_info = hw;
  using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
  args.scheduler.raster_order = rows_in_order ? Raster::AlongN : Raster::AlongM;
  if (g->gemm.can_implement(args) != cutlass::Status::kSuccess) {
    fprintf(stderr, "moe_ffn: CUTLASS cannot implement the grouped GEMM\n");
    return 2;
  }
  size_t ws = G::get_workspace_size(args);
  if (ws) FFN_CUDA(cudaMalloc(&g->workspace, ws));
  if (g->gemm.initialize(args, g->workspace) != cutlass::Status::kSuccess) {
    fprintf(stderr, "moe_ffn: CUTLASS grouped GEMM initialisation failed\n");
    return 3;
  }
  return 0;
}

// One thread per group slot: problem shapes and operand pointers of both GEMMs from the device-side groups.
__global__ void prepare(int max_groups, int groups, int64_t H, int64_t I, const Element* x, const Element* w1,
                        const Element* w2, Element* h1, Element* act, Element* y, void* const* y_group,
                        const int32_t* rows, const int64_t* row_offset, const int32_t* expert, Arrays up,
                        Arrays down, cuco::kit::RowArrival* arrival, int64_t* first_row,
                        cuco::kit::RowArrival this_call) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= max_groups) return;
  int m = g < groups ? rows[g] : 0;
  int64_t off = g < groups ? row_offset[g] : 0;
  int64_t e = g < groups ? expert[g] : 0;
  first_row[g] = off;
  if (g == 0) *arrival = this_call;  // stream-ordered before the up GEMM reads it
  up.shapes[g] = Shape3(m, (int)(2 * I), (int)H);
  up.a[g] = x + off * H;
  up.b[g] = w1 + e * 2 * I * H;
  up.d[g] = h1 + off * 2 * I;
  down.shapes[g] = Shape3(m, (int)H, (int)I);
  down.a[g] = act + off * I;
  down.b[g] = w2 + e * H * I;
  // y_group[g] (where given and set): the group's own output rows, e.g. another GPU's memory, so the down GEMM's
  // epilogue stores its rows there and no copy follows
  Element* own = y_group && g < groups ? (Element*)y_group[g] : nullptr;
  down.d[g] = own ? own : y + off * H;
}

// act[r, c] = silu(h1[r, c]) * h1[r, I + c], 8 columns per thread (16-byte loads); blockIdx.y is the group.
__global__ void swiglu(int64_t I, const __nv_bfloat16* h1, __nv_bfloat16* act, const int32_t* rows,
                       const int64_t* row_offset) {
  const int g = blockIdx.y;
  const int64_t m = rows[g], off = row_offset[g];
  const int64_t vec_per_row = I / 8;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m * vec_per_row;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = off + i / vec_per_row, c = (i % vec_per_row) * 8;
    uint4 gv = *reinterpret_cast<const uint4*>(h1 + r * 2 * I + c);
    uint4 uv = *reinterpret_cast<const uint4*>(h1 + r * 2 * I + I + c);
    const __nv_bfloat162* g2 = reinterpret_cast<const __nv_bfloat162*>(&gv);
    const __nv_bfloat162* u2 = reinterpret_cast<const __nv_bfloat162*>(&uv);
    uint4 ov;
    __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(&ov);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 gf = __bfloat1622float2(g2[k]), uf = __bfloat1622float2(u2[k]);
      float a = gf.x / (1.f + __expf(-gf.x)) * uf.x, b = gf.y / (1.f + __expf(-gf.y)) * uf.y;
      o2[k] = __floats2bfloat162_rn(a, b);
    }
    *reinterpret_cast<uint4*>(act + r * I + c) = ov;
  }
}

}  // namespace cuco_moe_ffn_impl

extern "C" int cuco_moe_ffn_create(cuco_moe_ffn** out, int max_groups, int64_t hidden, int64_t inter,
                                   int sm_count) {
  return cuco_moe_ffn_create_ex(out, max_groups, hidden, inter, sm_count, sm_count, 0);
}

extern "C" int cuco_moe_ffn_create_ex(cuco_moe_ffn** out, int max_groups, int64_t hidden, int64_t inter,
                                      int up_sm_count, int down_sm_count, int rows_in_order) {
  *out = nullptr;
  if (max_groups < 1 || hidden % 64 || inter % 64 || hidden <= 0 || inter <= 0) {
    fprintf(stderr, "moe_ffn: need max_groups >= 1, H and I positive multiples of 64 (got %d, %lld, %lld)\n",
            max_groups, (long long)hidden, (long long)inter);
    return 1;
  }
  int device = 0;
  FFN_CUDA(cudaGetDevice(&device));
  int sms = 0;
  FFN_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (up_sm_count <= 0 || up_sm_count > sms) up_sm_count = sms;
  if (down_sm_count <= 0 || down_sm_count > sms) down_sm_count = sms;
  cuco_moe_ffn* p = new cuco_moe_ffn();
  p->max_groups = max_groups;
  p->sms = sms;
  p->H = hidden;
  p->I = inter;
  int rc = alloc_arrays(&p->up.arr, max_groups, 2 * inter, hidden);
  if (!rc) rc = alloc_arrays(&p->down.arr, max_groups, hidden, inter);
  if (!rc) rc = alloc(&p->arrival, 1) || alloc(&p->first_row, max_groups);
  if (!rc && cudaMemset(p->arrival, 0, sizeof(cuco::kit::RowArrival)) != cudaSuccess) rc = 6;
  if (!rc) rc = bind(&p->up, max_groups, up_sm_count, device, rows_in_order != 0, p->arrival);
  if (!rc) rc = bind(&p->down, max_groups, down_sm_count, device, false, nullptr);
  if (rc) {
    cuco_moe_ffn_destroy(p);
    return rc;
  }
  *out = p;
  return 0;
}

extern "C" int cuco_moe_ffn_run(cuco_moe_ffn* p, int groups, const void* x, const void* w1, const void* w2,
                                void* h1, void* act, void* y, const int32_t* rows, const int64_t* row_offset,
                                const int32_t* expert, cudaStream_t stream) {
  return cuco_moe_ffn_run_to(p, groups, x, w1, w2, h1, act, y, nullptr, rows, row_offset, expert, stream);
}

extern "C" int cuco_moe_ffn_run_to(cuco_moe_ffn* p, int groups, const void* x, const void* w1, const void* w2,
                                   void* h1, void* act, void* y, void* const* y_group, const int32_t* rows,
                                   const int64_t* row_offset, const int32_t* expert, cudaStream_t stream) {
  return cuco_moe_ffn_run_arrival(p, groups, x, w1, w2, h1, act, y, y_group, rows, row_offset, expert, nullptr,
                                  nullptr, 1, stream);
}

extern "C" int cuco_moe_ffn_run_arrival(cuco_moe_ffn* p, int groups, const void* x, const void* w1, const void* w2,
                                        void* h1, void* act, void* y, void* const* y_group, const int32_t* rows,
                                        const int64_t* row_offset, const int32_t* expert, const uint32_t* chunk_flags,
                                        const uint32_t* epoch_at, int64_t chunk_rows, cudaStream_t stream) {
  if (!p || groups < 0 || groups > p->max_groups) return 1;
  if (chunk_flags && (!epoch_at || chunk_rows < 1)) return 1;
  if (groups == 0) return 0;
  const cuco::kit::RowArrival this_call{chunk_flags, epoch_at, chunk_flags ? chunk_rows : 1, p->first_row};
  prepare<<<(p->max_groups + 127) / 128, 128, 0, stream>>>(
      p->max_groups, groups, p->H, p->I, (const Element*)x, (const Element*)w1, (const Element*)w2, (Element*)h1,
      (Element*)act, (Element*)y, y_group, rows, row_offset, expert, p->up.arr, p->down.arr, p->arrival,
      p->first_row, this_call);
  FFN_CUDA(cudaGetLastError());
  if (p->up.gemm.run(stream) != cutlass::Status::kSuccess) return 4;
  // at least 4 CTAs per SM over all groups: 64 per group left one 4096-row group's SwiGLU on 64 CTAs, and the FFN
  // of two 2048-row groups ran 6 % faster than of the same rows as one group (results/moe_split_cost/README.md)
  const int per_group = std::max(64, (4 * p->sms + groups - 1) / groups);
  swiglu<<<dim3(per_group, groups), 256, 0, stream>>>(p->I, (const __nv_bfloat16*)h1, (__nv_bfloat16*)act, rows,
                                                      row_offset);
  FFN_CUDA(cudaGetLastError());
  if (p->down.gemm.run(stream) != cutlass::Status::kSuccess) return 5;
  return 0;
}

extern "C" const char* cuco_moe_ffn_config(void) {
  return "CUTLASS sm90 grouped GEMM (ptr-array, device problem sizes), bf16 -> fp32 acc -> bf16, "
         "KernelPtrArrayTmaWarpSpecializedCooperative, tile 128x256x64, cluster 1x2x1; SwiGLU kernel between; "
         "the up GEMM's producer waits for arriving rows where a call names chunk flags";
}

extern "C" int cuco_moe_ffn_destroy(cuco_moe_ffn* p) {
  if (!p) return 0;
  free_arrays(&p->up.arr);
  free_arrays(&p->down.arr);
  cudaFree(p->arrival);
  cudaFree(p->first_row);
  cudaFree(p->up.workspace);
  cudaFree(p->down.workspace);
  delete p;
  return 0;
}
