// CUDA-graph capture and replay of a candidate that verified (--graph-replays N): every rank captures one
// launch exactly as verification enqueues it (side-stream fork and join, the delayed-arrival spin included),
// instantiates it, and replays it N times, each time with fresh inputs (a new seed), poisoned outputs and the
// workload's check on every rank.
//
// Why: a graph freezes every host-side argument of the captured launch, ctx->iteration among them. Candidates
// that take their flag epoch from it (as kit/skeleton.cuh did before it kept the epoch on the device) wait for the
// same epoch on every replay; from the second replay on their flags are already set, so a consumer reads before
// the delayed remote writer has written and the check fails. That is recorded truthfully, never repaired here.
//
// The outcome goes to the candidate's graph record only; the candidate's own status stays its verify/bench result.
#include <cstdio>

#include "rank.h"

namespace cuco_harness {

namespace {

constexpr uint64_t kFullEntropyBit = 1ull << 63;  // cuco/gen.cuh: the top bit of a seed selects full-entropy inputs

// Replay i's seed: the run's seeds in turn, each moved by (i + 1) * 1000003 in the low 63 bits, so every replay's
// inputs differ from the others' and from those verification (and the timed runs) left in the buffers.
uint64_t replay_seed(const std::vector<uint64_t>& seeds, int i) {
  uint64_t base = seeds[static_cast<size_t>(i) % seeds.size()];
  uint64_t top = base & kFullEntropyBit;
  return top | (((base & ~kFullEntropyBit) + static_cast<uint64_t>(i + 1) * 1000003ull) & ~kFullEntropyBit);
}

std::string cuda_text(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

// Owns the captured graph and its executable form on every path out of the phase.
struct GraphHandles {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~GraphHandles() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

}  // namespace

std::string Rank::capture_launch(cuco_candidate_launch_fn launch, cudaGraph_t* graph) {
  *graph = nullptr;
  cudaError_t begin = cudaStreamBeginCapture(ctx_.stream, cudaStreamCaptureModeThreadLocal);
  if (begin != cudaSuccess) return "cudaStreamBeginCapture failed: " + cuda_text(begin);
  // One launch, exactly as verification enqueues it. launch_joined increments ctx_.iteration once, here, on the
  // host: the graph holds that one value, and no replay changes it (nothing host-side runs during a replay).
  std::string why;
  try {
    why = launch_joined(launch, false, true);
  } catch (const HarnessError& e) {
    if (e.sticky()) throw;  // the context is gone: the process ends as "crash"
    why = e.what();         // e.g. a harness event record on a capture the candidate invalidated
  }
  // End the capture on every path, so the stream leaves capture mode whatever the candidate did inside it.
  cudaError_t end = cudaStreamEndCapture(ctx_.stream, graph);
  cudaError_t last = cudaGetLastError();  // clear what a failed capture left behind
  if (is_sticky(end)) throw_cuda(end, "cudaStreamEndCapture", __FILE__, __LINE__);
  if (is_sticky(last)) throw_cuda(last, "the captured launch", __FILE__, __LINE__);
  if (end != cudaSuccess && why.empty()) why = "cudaStreamEndCapture failed: " + cuda_text(end);
  else if (end != cudaSuccess) why += "; cudaStreamEndCapture: " + cuda_text(end);
  if (why.empty() && *graph == nullptr) why = "cudaStreamEndCapture returned no graph";
  if (!why.empty() && *graph) {
    cudaGraphDestroy(*graph);
    *graph = nullptr;
  }
  // A capture the candidate broke must not leave either stream capturing: later phases would fail on it.
  for (cudaStream_t s : {ctx_.stream, ctx_.side_stream}) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CUCO_CK(cudaStreamIsCapturing(s, &st));
    if (st != cudaStreamCaptureStatusNone) CUCO_FAIL("a stream is still capturing after the graph capture ended");
  }
  return why;
}

void Rank::graph_replay(Target t, const CandidatePlugin& c) {
  enter(t, "graph");
  const Options& o = s_.opts;
  GraphRecord rec;
  rec.status = "running";
  if (records()) s_.report.set_graph(t.index, rec);
  // Ends the phase: the first failure (agreed by every rank) names the status; `replay` is the one that failed.
  auto settle = [&](const std::string& status, const std::string& why, int replay, uint64_t seed) {
    rec.status = status;
    rec.reason = why;
    rec.failed_replay = replay;
    rec.failed_seed = replay >= 0 ? seed : 0;
    if (records()) s_.report.set_graph(t.index, rec);
  };
  auto all_ok = [&](const std::string& err, std::string* why) { return s_.group.all_ok(me_.rank, err.empty(), err, why); };

  GraphHandles h;
  std::string why;
  // Every rank has finished its earlier work (the timed runs' last sync) before any rank starts capturing.
  std::string err = attempt(t, [&] { CUCO_CK(cudaDeviceSynchronize()); });
  if (!all_ok(err, &why)) return settle("error", why, -1, 0);
  std::string capture_err;
  err = attempt(t, [&] { capture_err = capture_launch(c.launch, &h.graph); });
  if (!all_ok(err, &why)) return settle("error", why, -1, 0);
  if (!all_ok(capture_err, &why)) return settle("not_capturable", why, -1, 0);
  err = attempt(t, [&] {
    cudaError_t e = cudaGraphInstantiate(&h.exec, h.graph, 0);
    cudaGetLastError();
    if (is_sticky(e)) throw_cuda(e, "cudaGraphInstantiate", __FILE__, __LINE__);
    if (e != cudaSuccess) capture_err = "cudaGraphInstantiate failed: " + cuda_text(e);
  });
  if (!all_ok(err, &why)) return settle("error", why, -1, 0);
  if (!all_ok(capture_err, &why)) return settle("not_capturable", why, -1, 0);

  for (int i = 0; i < o.graph_replays; ++i) {
    uint64_t seed = replay_seed(o.seeds, i);
    rec.failed_replay = i;  // while running: the replay in progress (a hang or crash here names it)
    rec.failed_seed = seed;
    if (records()) s_.report.set_graph(t.index, rec);
    if (!all_ok(attempt(t, [&] { fill_and_poison(seed); }), &why)) return settle("error", why, i, seed);
    err = attempt(t, [&] { CUCO_CK(cudaGraphLaunch(h.exec, ctx_.stream)); });
    // As in verification: agree first, then sync; a peer stuck waiting for a rank that did not launch is the
    // watchdog's (the graph record then says hang).
    bool launched = all_ok(err, &why);
    std::string launch_why = why;
    err = attempt(t, [&] { CUCO_CK(cudaStreamSynchronize(ctx_.stream)); });
    if (!launched) return settle("error", launch_why, i, seed);
    if (!all_ok(err, &why)) return settle("error", why, i, seed);

    cuco_check_result r{};
    err = attempt(t, [&] {
      int rc = s_.workload.check(&ctx_, seed, &r);
      if (rc != 0) CUCO_FAIL("cuco_workload_check returned " + std::to_string(rc));
      CUCO_CK(cudaDeviceSynchronize());
    });
    if (!all_ok(err, &why)) return settle("error", why, i, seed);
    r.message[sizeof r.message - 1] = '\0';
    std::string mine;
    if (!r.passed) {
      char buf[640];
      std::snprintf(buf, sizeof buf, "replay %d, seed %llu: %lld of %lld elements wrong, %lld NaN/Inf, max_abs_err %.3g%s%s",
                    i, static_cast<unsigned long long>(seed), static_cast<long long>(r.n_bad),
                    static_cast<long long>(r.n_checked), static_cast<long long>(r.n_nan), r.max_abs_err,
                    r.message[0] ? ": " : "", r.message);
      mine = buf;
    }
    if (!all_ok(mine, &why)) return settle("failed", why, i, seed);
  }
  settle("passed", "", -1, 0);
}

}  // namespace cuco_harness
