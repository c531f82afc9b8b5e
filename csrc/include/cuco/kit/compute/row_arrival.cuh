// Rows that arrive while a CUTLASS Hopper grouped GEMM runs: the producer warp of the GEMM waits, before the TMA
// loads of a work tile, until the chunks of A rows that tile reads are flagged as landed.
//
// The rows of every group live in one buffer, cut into chunks of `chunk_rows` rows; chunk c has landed when
// flags[c] has reached the launch's epoch (int32 difference, so the epoch may wrap). Group g's rows start at row
// first_row[g] of the buffer. Whoever writes the rows (another kernel's SMs, a peer over NVLink, copy engines)
// stores them, then raises the chunk's flag with release semantics; the GEMM acquires the flag at system scope and
// fences the async proxy, so the TMA unit reads what was written.
//
// Only the producer warp waits; the consumers find their stage empty a little longer. A waiting CTA holds its SM:
// whatever raises the flags must not need the SMs the GEMM occupies (give the GEMM fewer SMs than the device has,
// or raise the flags from copy engines or peers that never wait on this GEMM), else the wait can deadlock. Launch
// the kernels that raise the flags before the GEMM (or once before): CUDA loads a kernel at its first launch, and
// that load can wait for the running GEMM that waits for the kernel (a process hung so on an H200).
//
// Use: ArrivalArrayMainloop<Mainloop> in place of a ptr-array/grouped collective mainloop (e.g. what
// CollectiveBuilder gives for KernelPtrArrayTmaWarpSpecializedCooperative), its Arguments carrying a
// `const RowArrival*` in device memory (null: never wait). The kernel tells the mainloop of each change of group
// (tensors_perform_update) before the first load of the group's tiles; the mainloop remembers the group and its rows.
#pragma once

#include <stdint.h>

#include "cuco/epoch.cuh"
#include "cuco/kit/compute/with_arrival.cuh"
#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"

namespace cuco::kit {

/// Where the rows come from, in device memory so that each call can change it without re-initialising the GEMM.
struct RowArrival {
  const uint32_t* flags = nullptr;     // one per chunk; null: the rows are there, nothing to wait for
  const uint32_t* epoch_at = nullptr;  // the launch's epoch (device memory, written by an earlier kernel)
  int64_t chunk_rows = 1;
  const int64_t* first_row = nullptr;  // per group: its first row in the buffer
};

/// Lane 0 of the calling warp waits until every chunk that rows [r0, r1) of the buffer overlap has landed, then
/// fences the async proxy; the warp leaves together.
__device__ __forceinline__ void wait_row_chunks(const uint32_t* flags, uint32_t epoch, int64_t chunk_rows, int64_t r0,
                                                int64_t r1) {
  if ((threadIdx.x & 31) == 0 && r0 < r1) {
    for (int64_t c = r0 / chunk_rows; c * chunk_rows < r1; ++c) cuco::lsa::wait_epoch(flags + c, epoch);
    // written by another agent through the generic proxy, read by TMA (the async proxy)
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }
  __syncwarp();
}

/// The grouped mainloop `Base` whose producer waits for a tile's rows (see the top of this file).
template <class Base>
struct ArrivalArrayMainloop : WithArrival<Base, const RowArrival*> {
  using Params = typename WithArrival<Base, const RowArrival*>::Params;
  static constexpr int kTileM = cute::size<0>(typename Base::TileShape{});

  // the kernel calls this before the first load of every group's tiles: remember the group and its rows
  template <class InputTensors, class ProblemShapeMNKL>
  CUTLASS_DEVICE InputTensors tensors_perform_update(InputTensors const& inputs, Params const& params,
                                                     ProblemShapeMNKL problem_shape_mnkl, int32_t next_batch) {
    group_ = next_batch;
    group_rows_ = cute::get<0>(problem_shape_mnkl);
    return Base::tensors_perform_update(inputs, params, problem_shape_mnkl, next_batch);
  }

  template <class Pipeline, class PipeState, class LoadInputs, class TensorMaps, class BlockCoord, class KTileIter,
            class Storage>
  CUTLASS_DEVICE void load(Params const& params, Pipeline pipeline, PipeState state, LoadInputs const& inputs,
                           TensorMaps const& tensormaps, BlockCoord const& blk, KTileIter k_iter, int k_count,
                           int thread_idx, uint32_t block_rank_in_cluster, Storage& storage) {
    if (params.arrival != nullptr) {
      const RowArrival a = *params.arrival;
      if (a.flags != nullptr) {
        const int64_t r0 = int64_t(cute::get<0>(blk)) * kTileM;
        const int64_t r1 = r0 + kTileM < group_rows_ ? r0 + kTileM : group_rows_;
        const int64_t first = a.first_row[group_];
        wait_row_chunks(a.flags, *a.epoch_at, a.chunk_rows, first + r0, first + r1);
      }
    }
    Base::load(params, pipeline, state, inputs, tensormaps, blk, k_iter, k_count, thread_idx, block_rank_in_cluster,
               storage);
  }

 private:
  int32_t group_ = 0;
  int64_t group_rows_ = 0;
};

}  // namespace cuco::kit
