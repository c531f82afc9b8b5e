// A workload plugin's six entry points (cuco/abi.h) from one description, as nccl-tests' collectives fill a
// `struct testColl` and leave the rest to the common harness. A plugin file keeps its real logic (buffers, fill,
// check, parts) and ends with
//
//   constexpr cuco::kit::WorkloadPlugin<State> kPlugin = {"moe takes 6 dims T,H,I,E,K,R", 6, NBUF, refuse,
//                                                          buffers, setup, fill, check, part_compute, part_comm};
//   CUCO_WORKLOAD_PLUGIN(kPlugin)
//
// The entry points check their arguments here, once (null pointers; at setup, dims, world and buffers that are not
// what describe() gives for them; state missing because setup() did not run), own the workload state (`new State`
// at setup, `delete` at teardown: State's destructor frees what setup allocated, also after a setup that failed half
// way) and hand the workload's functions a State& that is never null.
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <type_traits>

#include "cuco/abi.h"

namespace cuco {
namespace kit {

// What the entry points return besides the workload's own codes (0: success).
enum PluginError : int {
  kPluginRefused = 1,      // describe(): dims or world refused (out->error says why); setup(): a ctx whose dims,
                           // world or buffers (count, sizes, memory) are not what describe() gives
  kPluginBadArgument = 2,  // a null pointer
  kPluginNoState = 3,      // fill, check or a part without a successful setup()
  kPluginCuda = 100,       // + cudaError_t (CUCO_PLUGIN_CUDA); the workload's functions return their own codes
};

// Up to CUCO_MAX_BUFFERS specs, in the order candidates index ctx->buffers (unused entries stay zero).
struct Buffers {
  cuco_buffer_spec spec[CUCO_MAX_BUFFERS];
};

template <typename S>
struct WorkloadPlugin {
  using State = S;
  const char* usage;  // the refusal of a wrong dims count, e.g. "moe takes 6 dims T,H,I,E,K,R" (", got N" follows)
  int ndims;
  int nbuffers;
  // nullptr, or the constraint (dims, world) violates, written to out->error (may point to a static buffer).
  const char* (*refuse)(const int64_t* dims, int world);
  Buffers (*buffers)(const int64_t* dims, int world);  // called only for dims refuse() accepts
  int (*setup)(cuco_ctx* ctx, State& s);  // nullptr: a default-constructed State is all there is
  int (*fill)(cuco_ctx* ctx, State& s, uint64_t seed);
  int (*check)(cuco_ctx* ctx, State& s, uint64_t seed, cuco_check_result* out);  // *out zeroed before the call
  int (*compute)(cuco_ctx* ctx, State& s);  // part "compute" (nullptr: none)
  int (*comm)(cuco_ctx* ctx, State& s);     // part "comm" (nullptr: none)
};

// Clears `out`; true (and out->error set) when `dims` is refused: `ndims` is not `want` (`usage` names the dims),
// or `why(dims, world)` names a violated constraint.
inline bool describe_refuses(cuco_workload_desc* out, const char* usage, int want, const int64_t* dims, int ndims,
                             int world, const char* (*why)(const int64_t*, int)) {
  memset(out, 0, sizeof(*out));
  if (ndims != want) {
    snprintf(out->error, sizeof(out->error), "%s; got %d", usage, ndims);
    return true;
  }
  if (const char* reason = why ? why(dims, world) : nullptr) {
    snprintf(out->error, sizeof(out->error), "%s", reason);
    return true;
  }
  return false;
}

template <typename S>
int plugin_describe(const WorkloadPlugin<S>& p, const int64_t* dims, int ndims, int world, cuco_workload_desc* out) {
  if (!out) return kPluginBadArgument;
  if (!dims && ndims > 0) {
    memset(out, 0, sizeof(*out));
    snprintf(out->error, sizeof(out->error), "no dims given (null pointer)");
    return kPluginBadArgument;
  }
  if (describe_refuses(out, p.usage, p.ndims, dims, ndims, world, p.refuse)) return kPluginRefused;
  const Buffers b = p.buffers(dims, world);
  out->nbuffers = p.nbuffers;
  for (int i = 0; i < p.nbuffers; ++i) out->buffers[i] = b.spec[i];
  return 0;
}

// True when ctx's dims, world and buffers are what describe() gives for them (count, sizes, memory behind each).
template <typename S>
bool plugin_ctx_matches(const WorkloadPlugin<S>& p, const cuco_ctx* ctx) {
  if (ctx->ndims != p.ndims || ctx->nbuffers != p.nbuffers) return false;
  if (p.refuse && p.refuse(ctx->dims, ctx->world)) return false;
  const Buffers b = p.buffers(ctx->dims, ctx->world);
  for (int i = 0; i < p.nbuffers; ++i)
    if (ctx->buffers[i].bytes != b.spec[i].bytes || (b.spec[i].bytes && !ctx->buffers[i].ptr)) return false;
  return true;
}

template <typename S>
int plugin_setup(const WorkloadPlugin<S>& p, cuco_ctx* ctx) {
  if (!ctx) return kPluginBadArgument;
  if (!plugin_ctx_matches(p, ctx)) return kPluginRefused;
  S* s = new S();
  ctx->workload_state = s;  // teardown frees it whatever setup returns
  return p.setup ? p.setup(ctx, *s) : 0;
}

template <typename S>
S* plugin_state(cuco_ctx* ctx) {
  return ctx ? static_cast<S*>(ctx->workload_state) : nullptr;
}

template <typename S>
int plugin_fill(const WorkloadPlugin<S>& p, cuco_ctx* ctx, uint64_t seed) {
  if (!ctx) return kPluginBadArgument;
  S* s = plugin_state<S>(ctx);
  return s ? p.fill(ctx, *s, seed) : kPluginNoState;
}

template <typename S>
int plugin_check(const WorkloadPlugin<S>& p, cuco_ctx* ctx, uint64_t seed, cuco_check_result* out) {
  if (!ctx || !out) return kPluginBadArgument;
  memset(out, 0, sizeof(*out));
  S* s = plugin_state<S>(ctx);
  return s ? p.check(ctx, *s, seed, out) : kPluginNoState;
}

template <typename S>
int plugin_teardown(cuco_ctx* ctx) {
  if (!ctx) return kPluginBadArgument;
  delete plugin_state<S>(ctx);
  ctx->workload_state = nullptr;
  return 0;
}

// A part's launch: the harness calls a plain int(cuco_ctx*), so the description is a template argument.
template <const auto& P, bool kComm>
int plugin_part(cuco_ctx* ctx) {
  using S = typename std::remove_reference_t<decltype(P)>::State;
  S* s = plugin_state<S>(ctx);
  if (!s) return ctx ? kPluginNoState : kPluginBadArgument;
  return kComm ? P.comm(ctx, *s) : P.compute(ctx, *s);
}

template <const auto& P>
int plugin_parts(const cuco_part** parts, int* nparts) {
  if (!parts || !nparts) return kPluginBadArgument;
  struct Table {
    cuco_part part[2];
    int n;
  };
  static const Table table = [] {
    Table t = {};
    if (P.compute) t.part[t.n++] = {"compute", 0, plugin_part<P, false>};
    if (P.comm) t.part[t.n++] = {"comm", 1, plugin_part<P, true>};
    return t;
  }();
  *parts = table.part;
  *nparts = table.n;
  return 0;
}

}  // namespace kit
}  // namespace cuco

// Return kPluginCuda + the error from the enclosing workload function when a CUDA call fails, naming the call.
#define CUCO_PLUGIN_CUDA(x)                                                                          \
  do {                                                                                               \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) {                                                                         \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));            \
      return cuco::kit::kPluginCuda + (int)e_;                                                       \
    }                                                                                                \
  } while (0)

// The six extern "C" workload entry points of cuco/abi.h, each a call into cuco::kit with the description P (a
// namespace-scope constexpr cuco::kit::WorkloadPlugin<State>).
#define CUCO_WORKLOAD_PLUGIN(P)                                                                            \
  static_assert(P.ndims >= 0 && P.ndims <= CUCO_MAX_DIMS, "ndims: 0 to CUCO_MAX_DIMS");                    \
  static_assert(P.nbuffers > 0 && P.nbuffers <= CUCO_MAX_BUFFERS, "nbuffers: 1 to CUCO_MAX_BUFFERS");      \
  static_assert(P.usage && P.buffers && P.fill && P.check, "usage, buffers, fill and check are required"); \
  extern "C" int cuco_workload_describe(const int64_t* dims, int ndims, int world, cuco_workload_desc* out) { \
    return cuco::kit::plugin_describe(P, dims, ndims, world, out);                                         \
  }                                                                                                        \
  extern "C" int cuco_workload_setup(cuco_ctx* ctx) { return cuco::kit::plugin_setup(P, ctx); }            \
  extern "C" int cuco_workload_fill(cuco_ctx* ctx, uint64_t seed) {                                        \
    return cuco::kit::plugin_fill(P, ctx, seed);                                                           \
  }                                                                                                        \
  extern "C" int cuco_workload_check(cuco_ctx* ctx, uint64_t seed, cuco_check_result* out) {               \
    return cuco::kit::plugin_check(P, ctx, seed, out);                                                     \
  }                                                                                                        \
  extern "C" int cuco_workload_parts(const cuco_part** parts, int* nparts) {                               \
    return cuco::kit::plugin_parts<P>(parts, nparts);                                                      \
  }                                                                                                        \
  extern "C" int cuco_workload_teardown(cuco_ctx* ctx) {                                                   \
    return cuco::kit::plugin_teardown<std::remove_reference_t<decltype(P)>::State>(ctx);                   \
  }
