// cuco fast path, candidate-ABI form: the harness owns the device communicator, the buffers' windows and
// the symmetric workspace; cucoFpBind adopts them for ctx->comm (window id 0 = the mailbox at the tail of
// the symmetric workspace, id 1+i = ctx->buffers[i] when it is symmetric).
#pragma once
#include "lsa_api.cuh"

static inline size_t cucoFpWorkspaceBytes(int world) { return (cucofp::mailboxBytes(world) + 255) & ~(size_t)255; }

static inline int cucoFpBind(cuco_ctx* ctx) {
  std::lock_guard<std::mutex> lock(cucofp::registry().mu);
  cucofp::CommState* s = cucofp::findState(ctx->comm);
  if (!s) {
    s = new cucofp::CommState();
    s->comm = ctx->comm;
    cucofp::registry().comms.push_back(s);
  }
  if (!ctx->has_devcomm || !ctx->symmetric_workspace.window ||
      ctx->symmetric_workspace.bytes < cucoFpWorkspaceBytes(ctx->world)) {
    fprintf(stderr, "cuco fast path: the harness gave no device communicator or a too small symmetric workspace\n");
    return 1;
  }
  s->owned = false; s->ready = true;
  s->device = ctx->device; s->rank = ctx->rank; s->nranks = ctx->world; s->dc = ctx->devcomm;
  s->mailboxOffset = ctx->symmetric_workspace.bytes - cucoFpWorkspaceBytes(ctx->world);
  s->wins.clear();
  s->wins.push_back(cucofp::Win{ctx->symmetric_workspace.ptr, ctx->symmetric_workspace.bytes, ctx->symmetric_workspace.window, true});
  for (int i = 0; i < ctx->nbuffers; ++i) {
    const cuco_buffer& b = ctx->buffers[i];
    s->wins.push_back(cucofp::Win{b.ptr, b.bytes, b.window, b.window != nullptr});
  }
  if (!s->ev && cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming) != cudaSuccess) return 1;
  return cucofp::checkLsa(s) == ncclSuccess ? 0 : 1;
}

// Raise the seed's requirements to what the LSA kernels need.
static inline void cucoFpRequire(const cuco_ctx* ctx, cuco_requirements* req) {
  if (req->lsa_barrier_count < cucofp::kCtas) req->lsa_barrier_count = cucofp::kCtas;
  req->symmetric_workspace_bytes = ((req->symmetric_workspace_bytes + 255) & ~(size_t)255) + cucoFpWorkspaceBytes(ctx->world);
}
