// Keys that arrive while the Hopper FMHA (fmha_hopper.cuh) runs: the producer warp waits, before the TMA loads of
// each KV tile, until the source that holds the tile's key rows has raised its landed flag. The FMHA can then start
// as soon as it is launched and attend to the keys that are there while the rest arrive, as MoE's grouped GEMM
// waits for its rows (row_arrival.cuh).
//
// Key row r of the call (its K and V pointers' row r) belongs to source kv_owner(arrival, row0 + r): the region's
// rows are cut into chunks of chunk_rows, and chunk c belongs to c, or under the zigzag layout to c (c < world) and
// 2 * world - 1 - c (the rest). The source's flag is flag0[src * src_stride]; it has landed when it has reached the
// launch's epoch (*epoch_at, written by an earlier kernel in stream order). Whoever writes the rows stores them,
// then raises the flag with release semantics; the producer acquires it at system scope and fences the async proxy,
// so the TMA unit reads what was written. A KV tile must lie in one chunk (chunk_rows a multiple of the tile).
//
// A waiting CTA holds its SM: the FMHA runs persistent on fewer SMs than the device has (sm_count), and whatever
// raises the flags must be able to run on the rest (launched before the FMHA, or on copy engines or peers).
#pragma once

#include <stdint.h>

#include "cuco/epoch.cuh"
#include "cuco/kit/compute/fmha_hopper.cuh"
#include "cuco/kit/compute/with_arrival.cuh"

namespace cuco::kit::fmha {

/// Where the keys come from; passed by value with each call (the FMHA is initialised per call).
struct KvArrival {
  const uint32_t* flag0 = nullptr;     // null: the keys are there, nothing to wait for
  const uint32_t* epoch_at = nullptr;  // the launch's epoch (device memory)
  int64_t src_stride = 1;              // source s's flag: flag0[s * src_stride]
  int64_t chunk_rows = 1;              // rows of the region per chunk (a multiple of the KV tile)
  int64_t row0 = 0;                    // the region row of the call's key row 0
  int world = 1;
  int zigzag = 0;                      // chunk c belongs to c (c < world) or 2 * world - 1 - c
};

/// The source that holds region row `row`.
__host__ __device__ inline int kv_owner(const KvArrival& a, int64_t row) {
  const int c = (int)(row / a.chunk_rows);
  return (!a.zigzag || c < a.world) ? c : 2 * a.world - 1 - c;
}

/// `Base`: the example's FmhaMainloopTmaWarpSpecialized; `Mask`: the Fusion it was built with. Its load of K/V
/// (load_kv_maybe_q, the example's, unchanged but for the wait) waits for each KV tile's source first.
template <class Base, class Mask>
struct ArrivalFmhaMainloop : WithArrival<Base, KvArrival> {
  using Params = typename WithArrival<Base, KvArrival>::Params;

  /// Lane 0 waits until the source of KV tile `tile` has landed, then fences the async proxy; the warp leaves
  /// together. `landed` (lane 0's bit per source already waited for in this work tile) skips both for a source seen
  /// before: a flag that has reached the epoch stays there for the launch, and the one fence orders every later TMA
  /// load after it. Without it the producer paid a system-scope acquire and a fence per KV tile, which at small head
  /// dims costs more than the tile's math and starves the consumers.
  CUTLASS_DEVICE static void wait_tile(KvArrival const& a, uint32_t epoch, int tile, uint32_t& landed) {
    if (a.flag0 != nullptr && (threadIdx.x & 31) == 0) {
      constexpr int kRows = cute::size<1>(typename Base::TileShapeQK{});
      const int src = kv_owner(a, a.row0 + int64_t(tile) * kRows);
      if (!((landed >> src) & 1u)) {
        cuco::lsa::wait_epoch(a.flag0 + src * a.src_stride, epoch);
        asm volatile("fence.proxy.async.global;" ::: "memory");  // written through the generic proxy, read by TMA
        landed |= 1u << src;
      }
    }
    __syncwarp();
  }

  template <bool kLoadQ, class BlkCoord, class ProblemShape, class LoadWarpBarrier>
  CUTLASS_DEVICE void load_kv_maybe_q(int block_rank_in_cluster, BlkCoord const& blk_coord, Params const& params,
                                      ProblemShape const& problem_size, typename Base::MainloopPipeline& pipeline,
                                      typename Base::PipelineState& smem_pipe_write,
                                      typename Base::MainloopPipelineQ& pipeline_q,
                                      typename Base::PipelineStateQ& smem_pipe_write_q,
                                      typename Base::SharedStorage& storage, LoadWarpBarrier& load_warp_barrier,
                                      bool do_barrier) {
    using namespace cute;
    const uint32_t epoch = params.arrival.flag0 != nullptr ? *params.arrival.epoch_at : 0u;
    uint32_t landed = 0;  // sources waited for in this work tile (lane 0's)
    int fusion_tile_count = Mask{}.get_trip_count(blk_coord, typename Base::TileShape{}, problem_size);
    int lane_predicate = cute::elect_one_sync();
    uint16_t mcast_mask_b = 0;  // a 1x1x1 cluster: no multicast

    auto q_tile_iter = cute::make_coord_iterator(Int<Base::NumMmaWarpGroups>{});
    [[maybe_unused]] int q_tile_count = Base::NumMmaWarpGroups;
    auto k_tile_iter = cute::make_coord_iterator(fusion_tile_count);
    int k_tile_count = 2 * fusion_tile_count;

    typename Base::LoadQ load_q{params.tma_load_q, pipeline_q, storage.smem_q};
    auto load_state_q = load_q.init_state(_0{}, problem_size, typename Base::TileShapeQK{}, blk_coord,
                                          Base::NumMmaWarpGroups);
    typename Base::LoadK load_k{params.tma_load_k, pipeline, storage.smem_k};
    auto load_state_k = load_k.init_state(block_rank_in_cluster, problem_size, typename Base::TileShapeQK{},
                                          blk_coord, fusion_tile_count);
    typename Base::LoadV load_v{params.tma_load_v, pipeline, storage.smem_v};
    auto load_state_v = load_v.init_state(block_rank_in_cluster, problem_size, typename Base::TileShapePV{},
                                          blk_coord, fusion_tile_count);

    if constexpr (kLoadQ) load_q.step(q_tile_iter, load_state_q, smem_pipe_write_q, lane_predicate, q_tile_count);
    if (k_tile_count > 0) wait_tile(params.arrival, epoch, int(*k_tile_iter), landed);
    load_k.template step<false>(k_tile_iter, load_state_k, smem_pipe_write, lane_predicate, k_tile_count,
                                mcast_mask_b);
    if constexpr (kLoadQ) load_q.step(q_tile_iter, load_state_q, smem_pipe_write_q, lane_predicate, q_tile_count);
    if constexpr (!kLoadQ) {
      if (do_barrier) {
        load_warp_barrier.arrive();
        load_warp_barrier.wait(/*phase=*/0);
        do_barrier = false;
      }
    }
    load_v.template step<true>(k_tile_iter, load_state_v, smem_pipe_write, lane_predicate, k_tile_count,
                               mcast_mask_b);
    if constexpr (kLoadQ) {
      while (q_tile_count > 0) load_q.step(q_tile_iter, load_state_q, smem_pipe_write_q, lane_predicate, q_tile_count);
    }
    CUTLASS_PRAGMA_NO_UNROLL
    while (k_tile_count > 0) {
      wait_tile(params.arrival, epoch, int(*k_tile_iter), landed);  // V of this tile comes from the same rows
      load_k.template step<false>(k_tile_iter, load_state_k, smem_pipe_write, lane_predicate, k_tile_count,
                                  mcast_mask_b);
      load_v.template step<true>(k_tile_iter, load_state_v, smem_pipe_write, lane_predicate, k_tile_count,
                                 mcast_mask_b);
    }
  }
};

/// forward_suffix (bf16 in, O as p.o_bf16 says) whose KV tiles wait for `arrival`, persistent on at most sm_count
/// SMs (0: all; leave the SMs that raise the flags). Status as forward, 1 also for an arrival that cannot be used
/// (no epoch, chunks that split a KV tile, or more than 32 sources).
template <int kHeadDim>
int forward_suffix_arrival(const Problem& p, const KvArrival& arrival, int sm_count, cudaStream_t stream) {
  if (int bad = check<kHeadDim, false, true>(p)) return bad;
  if (arrival.flag0 != nullptr &&
      (arrival.epoch_at == nullptr || arrival.chunk_rows <= 0 || arrival.chunk_rows % kv_tile<kHeadDim>() != 0 ||
       arrival.row0 % kv_tile<kHeadDim>() != 0 || arrival.world < 1 || arrival.world > 32))
    return 1;
  using Mask = detail::CausalSuffixFusion;
  using Mainloop = ArrivalFmhaMainloop<detail::PersistentKernel::Mainloop<kHeadDim, Mask>, Mask>;
  using O = cutlass::device::Universal<detail::PersistentKernel::KernelOf<Mainloop>>;
  return detail::run_op<O, RegisterOut, Persistent>(p, stream, sm_count,
                                                    [&](typename Mainloop::Arguments& m) { m.arrival = arrival; });
}

}  // namespace cuco::kit::fmha
