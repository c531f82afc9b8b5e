"""The frozen parts of a rendered GEMM+AllGather candidate: identical for every design point.

Everything here is outside the EVOLVE block: includes, the cuBLASLt plan cache and the candidate-ABI entry points,
which call the kit's skeleton (csrc/include/cuco/kit/skeleton.cuh: events, stream-ordered flags, peer tables,
side-stream fork/join). The block supplies `block_needs(ctx)` (what to ask the harness for) and
`enqueue(ctx, state)` (the operation).
"""

from __future__ import annotations

from pathlib import Path

from cuco.kit.template import fill
from cuco.kit.entry_points import skeleton_entry_points

_HERE = Path(__file__).resolve().parent


def lt_gemm_text() -> str:
    """lt_gemm.cuh without its include guard, inlined so a candidate is one self-contained file."""
    text = (_HERE / "lt_gemm.cuh").read_text()
    return text.replace("#pragma once\n", "")


HEAD = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>

#include "cuco/abi.h"
#include "cuco/compute/gemm_allgather.h"  // cuco_ag_gemm_persistent (the compute library)
#include "cuco/kit/layout.cuh"
#include "cuco/kit/skeleton.cuh"
#include "cuco/kit/sync.cuh"
#include "cuco/lsa.cuh"

// ---- cuBLASLt plans (frozen) ----------------------------------------------------------------------------
@LT_GEMM@
// ---- frozen helpers: buffers, GEMM plan cache (the kit's skeleton keeps events, stream ops, peers) -------
namespace cuco_ag {

// Buffer indices in ctx->buffers (the workload plugin's order). All bf16, row-major.
enum { BUF_A_LOCAL = 0, BUF_B = 1, BUF_C = 2, BUF_A_FULL = 3 };
constexpr size_t kLtWorkspaceBytes = 32u << 20;  // cuBLASLt workspace at the start of ctx->workspace
constexpr int kMaxPlans = 32;

using cuco::kit::launch_ok;
using cuco::kit::Needs;  // what the block asks of the harness; filled by block_needs() inside the EVOLVE block
using cuco::kit::peer_base;
using cuco::kit::stream_set_epoch;
using cuco::kit::stream_wait_epoch;

struct State : cuco::kit::Base {
  cublasLtHandle_t lt = nullptr;  // this candidate's cuBLASLt handle (created at setup)
  LtGemm plans[kMaxPlans];
  int nplans = 0;
};

// C rows = A rows . B for `rows` rows (A row-major K wide, C row-major N wide) on stream s. sm_target > 0 keeps
// the GEMM on that many SMs. Plans are cached per (rows, sm_target); the first launch pays for the heuristic.
static int gemm_rows(State* st, cuco_ctx* ctx, const void* a_rows, void* c_rows, int64_t rows, int sm_target,
                     cudaStream_t s) {
  if (rows <= 0) return 0;
  if (sm_target >= ctx->sm_count) sm_target = 0;
  LtGemm* plan = nullptr;
  for (int i = 0; i < st->nplans; ++i)
    if (st->plans[i].rows == rows && st->plans[i].sm_target == sm_target) plan = &st->plans[i];
  if (!plan) {
    if (st->nplans == kMaxPlans) return 61;
    plan = &st->plans[st->nplans++];
    int rc = lt_gemm_plan(st->lt, plan, rows, ctx->dims[1], ctx->dims[2], CUDA_R_16BF, kLtWorkspaceBytes, sm_target);
    if (rc) return 1000 + rc;
  }
  return lt_gemm_run(st->lt, plan, a_rows, ctx->buffers[BUF_B].ptr, c_rows, ctx->workspace, s);
}

// The block's plain flags live after the cuBLASLt workspace.
static uint32_t* local_flags(cuco_ctx* ctx) { return (uint32_t*)((char*)ctx->workspace + kLtWorkspaceBytes); }

}  // namespace cuco_ag
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen): the kit's skeleton around the block ---------------------------
namespace cuco_ag {
struct Candidate {
  using State = cuco_ag::State;
  static constexpr size_t kLibWorkspaceBytes = kLtWorkspaceBytes;
  static Needs needs(const cuco_ctx* ctx) { return block_needs(ctx); }
  static int setup(cuco_ctx* ctx, State* st) {
    if (cublasLtCreate(&st->lt) != CUBLAS_STATUS_SUCCESS) return 10;
    return block_setup(ctx, st);  // the EVOLVE block's own preparation (e.g. attaching NVSHMEM)
  }
  static int enqueue(cuco_ctx* ctx, State* st) { return cuco_ag::enqueue(ctx, st); }
  static void teardown(State* st) {
    for (int i = 0; i < st->nplans; ++i) lt_gemm_destroy(&st->plans[i]);
    if (st->lt) cublasLtDestroy(st->lt);
  }
};
}  // namespace cuco_ag

""" + skeleton_entry_points("cuco_ag::Candidate")


def head() -> str:
    """The frozen head of every candidate: includes and the inlined cuBLASLt plans."""
    return fill(HEAD, {"LT_GEMM": lt_gemm_text()}, what="GEMM+AllGather frozen head")
