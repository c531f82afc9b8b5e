// cuco fast path, issuer=copy_engine: the bytes of the movement collectives (AllGather, AlltoAll, Broadcast)
// move by cudaMemcpyAsync between LSA-mapped buffers, so no SM moves data. On the communication stream, per
// collective: [the Broadcast root stages send into recv] [copyEntryKernel: publish, wait for the sources
// (barrier or signals), check the addresses] [the copies: in order on the communication stream (whole), or cut
// into chunk_bytes chunks over kCopyStreams copy streams that start after the entry kernel and are joined
// before the exit] [copyExitKernel: wait until every reader is done]. A peer's buffer is addressed as this
// rank's window offset in that peer's mapping of the window, resolved once per window (resolvePeers).
#pragma once
#include "lsa_warm.cuh"

namespace cucofp {

// Each rank's base of every window not mapped yet (one small kernel and a synchronous copy per window; called
// at set-up by prepare(), here again only for windows registered later).
inline ncclResult_t resolvePeers(CommState* s) {
  bool stale = s->peers.size() != s->wins.size();
  for (size_t w = 0; w < s->peers.size() && !stale; ++w) stale = s->peers[w].win != s->wins[w].win;
  if (!stale) return ncclSuccess;
  CUCOFP_CUDA(cudaSetDevice(s->device));
  if (!s->peerScratch) CUCOFP_CUDA(cudaMalloc(&s->peerScratch, 64 * sizeof(char*)));
  s->peers.resize(s->wins.size());
  for (size_t w = 0; w < s->wins.size(); ++w) {
    CommState::PeerMap& m = s->peers[w];
    if (m.win == s->wins[w].win && !m.base.empty()) continue;
    m.win = s->wins[w].win;
    m.base.assign(s->nranks, nullptr);
    if (!s->wins[w].live || !m.win) continue;
    peerBasesKernel<<<1, 64, 0, cudaStreamPerThread>>>(m.win, s->nranks, s->peerScratch);
    CUCOFP_CUDA(cudaGetLastError());
    CUCOFP_CUDA(cudaMemcpyAsync(m.base.data(), s->peerScratch, s->nranks * sizeof(char*), cudaMemcpyDeviceToHost,
                                cudaStreamPerThread));
    CUCOFP_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
  }
  return ncclSuccess;
}

inline ncclResult_t copyStreams(CommState* s) {
  if (s->entered) return ncclSuccess;
  CUCOFP_CUDA(cudaEventCreateWithFlags(&s->entered, cudaEventDisableTiming));
  for (int i = 0; i < kCopyStreams; ++i) {
    CUCOFP_CUDA(newSideStream(&s->copy[i]));
    CUCOFP_CUDA(cudaEventCreateWithFlags(&s->copied[i], cudaEventDisableTiming));
  }
  return ncclSuccess;
}

inline ncclResult_t releaseCopies(CommState* s) {
  for (int i = 0; i < kCopyStreams; ++i) {
    if (s->copy[i]) CUCOFP_CUDA(freeSideStream(s->copy[i]));
    if (s->copied[i]) CUCOFP_CUDA(cudaEventDestroy(s->copied[i]));
  }
  if (s->entered) CUCOFP_CUDA(cudaEventDestroy(s->entered));
  if (s->peerScratch) CUCOFP_CUDA(cudaFree(s->peerScratch));
  return ncclSuccess;
}

struct Transfer { char* dst; const char* src; size_t bytes; };

// The copies of one collective, with `c` as launchCollective resolved it (c.send: what this rank publishes).
inline ncclResult_t launchCopies(CommState* s, const Pending& o, const Coll& c, const Launch& L, cudaStream_t st) {
  ncclResult_t r = resolvePeers(s);
  if (r == ncclSuccess && kChunkBytes) r = copyStreams(s);
  if (r != ncclSuccess) return r;
  int me = s->rank, nr = s->nranks;
  bool rooted = o.kind == kBroadcast;
  size_t bytes = c.count * c.elemBytes;
  unsigned long long published = o.kind == kAlltoAll ? bytes * nr : bytes;
  // Source p's buffer, as this rank expects it: at this rank's own window offset, or, for an in-place
  // AllGather (send = slice `me` of recv), at slice p of the same window.
  CopyExpect expect = {c.send, 0};
  if (o.kind == kAllGather && bytes && (const char*)c.sendLocal == (const char*)c.recv + (size_t)me * bytes) {
    expect.at.offset -= (unsigned long long)me * bytes;
    expect.stride = (long long)bytes;
  }
  if (expect.at.win >= s->peers.size()) CUCOFP_FAIL(ncclInternalError, "window %u has no peer mapping", expect.at.win);
  const std::vector<char*>& base = s->peers[expect.at.win].base;
  auto peer = [&](int p, size_t extra) -> const char* {
    return base[p] ? base[p] + expect.at.offset + (long long)p * expect.stride + extra : nullptr;
  };
  std::vector<Transfer> xs;
  for (int i = 0; i < nr; ++i) {   // staggered, as the kernels' gathers: no peer read by every rank at once
    int p = (me + i) % nr;
    char* dst = (char*)c.recv + (o.kind == kBroadcast ? 0 : (size_t)p * bytes);
    const char* src = nullptr;
    if (o.kind == kAllGather) src = p == me ? (const char*)c.sendLocal : peer(p, 0);
    else if (o.kind == kAlltoAll) src = p == me ? (const char*)c.sendLocal + (size_t)me * bytes : peer(p, (size_t)me * bytes);
    else if (p == o.root && me != o.root) src = peer(p, 0);
    else continue;
    if (!src) CUCOFP_FAIL(ncclInternalError, "rank %d: no mapping of rank %d's window %u", me, p, expect.at.win);
    if (dst != src && bytes) xs.push_back(Transfer{dst, src, bytes});
  }
  if (rooted && me == o.root && o.send != o.recv && bytes)
    CUCOFP_CUDA(cudaMemcpyAsync(o.recv, o.send, bytes, cudaMemcpyDefault, st));
  for (const Transfer& x : xs) poisonLate(x.dst, x.bytes, st);
  copyEntryKernel<MoveSync><<<1, 32, 0, st>>>(L, c.send, published, expect, rooted, o.root);
  CUCOFP_CUDA(cudaGetLastError());
  if (!kChunkBytes) {
    for (const Transfer& x : xs) CUCOFP_CUDA(cudaMemcpyAsync(x.dst, x.src, x.bytes, cudaMemcpyDefault, st));
  } else {
    size_t chunks = 0;
    for (const Transfer& x : xs) chunks += chunkCount(x.bytes, kChunkBytes);
    int used = chunks < (size_t)kCopyStreams ? (int)chunks : kCopyStreams;
    if (used) CUCOFP_CUDA(cudaEventRecord(s->entered, st));
    for (int i = 0; i < used; ++i) CUCOFP_CUDA(cudaStreamWaitEvent(s->copy[i], s->entered, 0));   // the entry wait
    for (size_t t = 0; t < xs.size(); ++t)
      for (size_t k = 0; k < chunkCount(xs[t].bytes, kChunkBytes); ++k) {
        size_t off = chunkOffset(kChunkBytes, k);
        CUCOFP_CUDA(cudaMemcpyAsync(xs[t].dst + off, xs[t].src + off, chunkLength(xs[t].bytes, kChunkBytes, k),
                                    cudaMemcpyDefault, s->copy[copyStreamOf((int)t, k, used)]));
      }
    for (int i = 0; i < used; ++i) {
      CUCOFP_CUDA(cudaEventRecord(s->copied[i], s->copy[i]));
      CUCOFP_CUDA(cudaStreamWaitEvent(st, s->copied[i], 0));
    }
  }
  copyExitKernel<MoveSync><<<1, 32, 0, st>>>(L, rooted, o.root);
  CUCOFP_CUDA(cudaGetLastError());
  return ncclSuccess;
}

}  // namespace cucofp
