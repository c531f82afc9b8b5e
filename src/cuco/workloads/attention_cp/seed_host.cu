// Host-driven ring attention (FlashAttention forward with context parallelism): the program a user brings, in
// candidate-ABI form, and the baseline that fitness is measured against.
//
// W ring steps. At step s this rank attends its queries to the KV block it holds (its own at s = 0, then the
// block of rank me - s), merging each partial result into an fp32 running output with the log-sum-exp (rounded to
// bf16 once, after the last step, as ring-flash-attention keeps its output in fp32; at W = 1 the only step writes
// bf16 O itself); meanwhile
// the side stream forwards that block to the next rank and receives the next one from the previous rank
// (ncclSend/ncclRecv), as ring-flash-attention does with its communication stream.
//
// dims = S, HQ, HKV, D, CAUSAL. Buffers: 0 Q, 1 KV (own block), 2 O, 3 LSE, 4 ring (slot p: rank p's block),
// 5 work (a partial O, its LSE, the running O: cuco_attn::work_bytes). Layouts and the zigzag schedule:
// cuco/compute/attention_cp.h.
#include <stdint.h>

#include "cuco/abi.h"
#include "cuco/compute/attention_cp.h"

namespace {

constexpr int kMaxWorld = 72;

struct Seed {
  cuco_attn::Geo g;
  size_t block;                       // bytes of one KV block
  cudaEvent_t start, landed[kMaxWorld];  // landed[s]: the block of step s is in its ring slot
};

}  // namespace

extern "C" int cuco_candidate_requirements(const cuco_ctx*, cuco_requirements*) { return 0; }

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  Seed* s = new Seed();
  ctx->candidate_state = s;
  s->g = cuco_attn::geo_of_dims(ctx->dims, ctx->world);
  s->block = (size_t)(2 * cuco_attn::kv_block_elems(s->g));
  if (ctx->world > kMaxWorld) return 1;
  if (cudaEventCreateWithFlags(&s->start, cudaEventDisableTiming) != cudaSuccess) return 2;
  for (int i = 0; i < ctx->world; ++i)
    if (cudaEventCreateWithFlags(&s->landed[i], cudaEventDisableTiming) != cudaSuccess) return 2;
  return 0;
}

extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  const cuco_attn::Geo& g = s->g;
  const int me = ctx->rank, W = ctx->world;
  cudaStream_t st = ctx->stream, comm = ctx->side_stream;
  char* ring = (char*)ctx->buffers[4].ptr;
  char* work = (char*)ctx->buffers[5].ptr;
  if (cudaEventRecord(s->start, st) != cudaSuccess || cudaStreamWaitEvent(comm, s->start, 0) != cudaSuccess) return 3;
  for (int step = 0; step < W; ++step) {
    const int src = cuco_attn::source_at(me, step, W);
    const char* cur = step == 0 ? (const char*)ctx->buffers[1].ptr : ring + src * s->block;
    if (step + 1 < W) {  // forward the current block, receive the next one
      const int nxt = cuco_attn::source_at(me, step + 1, W);
      ncclGroupStart();
      ncclSend(cur, s->block / 2, ncclBfloat16, (me + 1) % W, ctx->comm, comm);
      ncclRecv(ring + nxt * s->block, s->block / 2, ncclBfloat16, (me + W - 1) % W, ctx->comm, comm);
      ncclGroupEnd();
      if (cudaEventRecord(s->landed[step + 1], comm) != cudaSuccess) return 4;
    }
    if (step > 0 && cudaStreamWaitEvent(st, s->landed[step], 0) != cudaSuccess) return 5;
    int rc = cuco_attn::ring_step(g, me, step, ctx->buffers[0].ptr, cur, ctx->buffers[2].ptr,
                                  (float*)ctx->buffers[3].ptr, work, st);
    if (rc) return rc;
  }
  if (int rc = cuco_attn::ring_finish(g, ctx->buffers[2].ptr, work, st)) return 300 + rc;
  return cudaGetLastError() == cudaSuccess ? 0 : 20;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  if (!s) return 0;
  cudaEventDestroy(s->start);
  for (int i = 0; i < ctx->world; ++i) cudaEventDestroy(s->landed[i]);
  delete s;
  ctx->candidate_state = nullptr;
  return 0;
}
