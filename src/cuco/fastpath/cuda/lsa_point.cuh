// cuco fast path: the design point, as macros set by the program's point block (cuco.program.space), else the
// fast path's conservative point (deferred, world, cta, whole buffers, 32 CTAs), whose code paths these
// defaults keep.
//
// CUCOFP_PLACEMENT 0 = deferred (each kernel on the caller's stream, where the NCCL call was), 1 = stream_overlap
//   (on a per-communicator side stream forked from the caller's; the caller's stream waits for it only at the
//   cucoJoin() the transform places before the first statement that depends on the transfer, so independent
//   kernels in between overlap it).
// CUCOFP_COMM_CTAS: CTAs per communication kernel (fewer leave SMs to compute; more than 32 also lay the mailbox
//   and the LSA barriers out for that many, lsa_kernels.cuh's kCtas, and must fit the GPU's SMs at once).
// CUCOFP_SYNC_SCOPE 0 = world (LSA barriers order every collective), 1 = signal (the movement collectives,
//   AllGather, AlltoAll and Broadcast, wait only for the peers they read and are read by, through per-peer
//   ready/done flags in the mailbox; reductions keep their barriers).
// CUCOFP_ISSUER 0 = cta (kernels move the bytes), 1 = copy_engine (the movement collectives' bytes move by
//   cudaMemcpyAsync between LSA-mapped buffers, between an entry and an exit kernel of one CTA: no SM moves
//   data; reductions and sends/receives stay on SM kernels).
// CUCOFP_CHUNK_BYTES 0 = whole transfers; else (copy_engine only) each transfer is cut into chunks of this many
//   bytes, spread over kCopyStreams copy streams so that several copy engines and NVLink peers work at once.
// CUCOFP_ALLREDUCE 0 = auto (push where it applies, else one shot up to oneShotMaxBytes(W), else two shot: the
//   reductions sweeps' fastest at every measured size, lsa_runtime.cuh), 1 = one shot, 2 = two shot; in-place
//   calls are two shot unless pushed. 3 = push (lsa_push.cuh: stores into every peer and one one-way signal, no
//   barrier) for float, half and bfloat16 buffers of up to pushMaxBytes(W), in place too; other ones as auto.
// CUCOFP_REDUCESCATTER 0 = auto (push where it applies, else barriers), 1 = barriers (reducescatterKernel),
//   2 = push (lsa_push.cuh) for float, half and bfloat16 slices of up to pushMaxBytes(W); other ones with
//   barriers.
#pragma once
#include "lsa_push.cuh"

#ifndef CUCOFP_PLACEMENT
#define CUCOFP_PLACEMENT 0
#endif
#ifndef CUCOFP_COMM_CTAS
#define CUCOFP_COMM_CTAS 32
#endif
#ifndef CUCOFP_SYNC_SCOPE
#define CUCOFP_SYNC_SCOPE 0
#endif
#ifndef CUCOFP_ISSUER
#define CUCOFP_ISSUER 0
#endif
#ifndef CUCOFP_CHUNK_BYTES
#define CUCOFP_CHUNK_BYTES 0
#endif
#ifndef CUCOFP_ALLREDUCE
#define CUCOFP_ALLREDUCE 0
#endif
#ifndef CUCOFP_REDUCE_TYPES   // set by the transform (cuco.fastpath.transform.reduce_types); else every type
#define CUCOFP_REDUCE_TYPES 0x3ff
#endif
#ifndef CUCOFP_REDUCESCATTER
#define CUCOFP_REDUCESCATTER 0
#endif

namespace cucofp {

static_assert(CUCOFP_PLACEMENT == 0 || CUCOFP_PLACEMENT == 1, "CUCOFP_PLACEMENT is 0 (deferred) or 1 (stream_overlap)");
static_assert(CUCOFP_COMM_CTAS >= 1 && CUCOFP_COMM_CTAS <= kCtas,
              "CUCOFP_COMM_CTAS must be >= 1, and over 32 defined ahead of lsa_kernels.cuh (its kCtas lays the "
              "mailbox and the barriers out for it)");
static_assert(CUCOFP_SYNC_SCOPE == 0 || CUCOFP_SYNC_SCOPE == 1, "CUCOFP_SYNC_SCOPE is 0 (world) or 1 (signal)");
static_assert(CUCOFP_ISSUER == 0 || CUCOFP_ISSUER == 1, "CUCOFP_ISSUER is 0 (cta) or 1 (copy_engine)");
static_assert(CUCOFP_CHUNK_BYTES == 0 || (CUCOFP_ISSUER == 1 && CUCOFP_CHUNK_BYTES >= 4096),
              "CUCOFP_CHUNK_BYTES (>= 4096) chunks copy-engine transfers: it needs CUCOFP_ISSUER 1; use 0 (whole)");
static_assert(CUCOFP_ALLREDUCE >= 0 && CUCOFP_ALLREDUCE <= 3,
              "CUCOFP_ALLREDUCE is 0 (auto), 1 (one shot), 2 (two shot) or 3 (push)");
constexpr int kCommCtas = CUCOFP_COMM_CTAS;
static_assert(CUCOFP_REDUCESCATTER >= 0 && CUCOFP_REDUCESCATTER <= 2,
              "CUCOFP_REDUCESCATTER is 0 (auto), 1 (barriers) or 2 (push)");
constexpr int kAllReduceAlgo = CUCOFP_ALLREDUCE;
constexpr int kReduceScatterAlgo = CUCOFP_REDUCESCATTER;
constexpr bool kCopyEngine = CUCOFP_ISSUER == 1;
constexpr size_t kChunkBytes = (size_t)CUCOFP_CHUNK_BYTES;
constexpr int kCopyStreams = 4;   // copy streams per communicator for chunked copy-engine transfers
#if CUCOFP_SYNC_SCOPE == 1
typedef SignalSync MoveSync;      // the ordering of the movement collectives
#else
typedef WorldSync MoveSync;
#endif

}  // namespace cucofp
