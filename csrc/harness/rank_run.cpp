// The life of a rank: parts (the bound), then every candidate: load, setup, verify per seed, bench, [trace,
// rank_trace.cpp], [graph replay, rank_graph.cpp], teardown. Statuses are recorded by the leader after all ranks
// agree; timings and checks per rank.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "delay.h"
#include "nvshmem_host.h"
#include "rank.h"

namespace cuco_harness {

namespace {

// Host-side wire format of per-rank records for HostGroup::allgather (text; doubles round-trip with %.17g).
std::string encode_times(const std::vector<double>& ms) {
  std::string s;
  char buf[32];
  for (double v : ms) {
    std::snprintf(buf, sizeof buf, "%.17g ", v);
    s += buf;
  }
  return s;
}

std::vector<double> decode_times(const std::string& s) {
  std::vector<double> out;
  const char* p = s.c_str();
  char* end = nullptr;
  for (double v = std::strtod(p, &end); end != p; v = std::strtod(p, &end)) {
    out.push_back(v);
    p = end;
  }
  return out;
}

std::string encode_check(const CheckRecord& c) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%llu %d %d %.17g %.17g %lld %lld %lld ", static_cast<unsigned long long>(c.seed),
                c.rank, c.passed ? 1 : 0, c.max_abs_err, c.rel_l2_err, static_cast<long long>(c.n_checked),
                static_cast<long long>(c.n_bad), static_cast<long long>(c.n_nan));
  return buf + c.message;
}

CheckRecord decode_check(const std::string& s) {
  CheckRecord c;
  unsigned long long seed = 0;
  long long checked = 0, bad = 0, nan = 0;
  int passed = 0, used = 0;
  std::sscanf(s.c_str(), "%llu %d %d %lg %lg %lld %lld %lld %n", &seed, &c.rank, &passed, &c.max_abs_err,
              &c.rel_l2_err, &checked, &bad, &nan, &used);
  c.seed = seed, c.passed = passed != 0, c.n_checked = checked, c.n_bad = bad, c.n_nan = nan;
  c.message = s.substr(static_cast<size_t>(used) <= s.size() ? static_cast<size_t>(used) : s.size());
  return c;
}

}  // namespace

void Rank::enter(Target t, const std::string& phase) {
  if (records()) s_.watchdog.enter(t, phase);
  // Every rank says where it is, in its own words: the recorder's phase may be one a peer never reached.
  phase_ = (t.kind == Target::kCandidate ? "candidate " + std::to_string(t.index) + " "
            : t.kind == Target::kPart    ? "part " + std::to_string(t.index) + " "
                                         : std::string()) + phase;
  agreements_ = 0;
  iteration_ = -1;
  note("entered");
}

bool Rank::agreed(Target t, const std::string& err, const std::string& status) {
  std::string why;
  // Numbered within the phase: ranks at different agreements of one phase have taken different paths.
  note("at host agreement " + std::to_string(++agreements_) + (err.empty() ? "" : " with: " + err));
  if (s_.group.all_ok(me_.rank, err.empty(), err, &why)) return true;
  if (records()) s_.report.set_status(t, status, why);
  return false;
}

void Rank::run() {
  Target h = Target::harness();
  std::string err = attempt(h, [&] { setup(); });
  std::string why;
  if (!s_.group.all_ok(me_.rank, err.empty(), err, &why)) {
    if (records()) s_.report.fatal("error", "rank setup failed: " + why, 2);
    s_.group.barrier();  // the leader ends the process; nobody goes on
  }
  if (s_.opts.warm_ms > 0) warm_up();
  if (s_.opts.parts) run_parts();
  for (size_t i = 0; i < s_.opts.candidates.size(); ++i) run_candidate(static_cast<int>(i));
  s_.group.barrier();
  // The result is complete before teardown: a teardown that hangs cannot change it.
  if (records()) {
    s_.report.finish();
    s_.watchdog.enter(h, "shutdown");
  }
  s_.group.barrier();
  err = attempt(h, [&] { teardown(); });
  if (!err.empty()) std::fprintf(stderr, "cuco-harness: rank %d teardown: %s\n", me_.rank, err.c_str());
}

void Rank::fill_and_poison(uint64_t seed) {
  int rc = s_.workload.fill(&ctx_, seed);
  if (rc != 0) CUCO_FAIL("cuco_workload_fill returned " + std::to_string(rc));
  CUCO_CK(cudaGetLastError());
  for (int i = 0; i < s_.desc.nbuffers; ++i) {
    int role = s_.desc.buffers[i].role;
    if ((role == CUCO_BUF_OUTPUT || role == CUCO_BUF_SCRATCH) && ctx_.buffers[i].ptr)
      CUCO_CK(cudaMemsetAsync(ctx_.buffers[i].ptr, 0xFF, ctx_.buffers[i].bytes, ctx_.stream));
  }
  CUCO_CK(cudaDeviceSynchronize());
}

std::string Rank::launch_joined(cuco_candidate_launch_fn launch, bool timed, bool delayed) {
  CUCO_CK(cudaEventRecord(fork_, ctx_.stream));
  CUCO_CK(cudaStreamWaitEvent(ctx_.side_stream, fork_, 0));
  if (delayed) CUCO_CK(enqueue_delay(ctx_.side_stream, staggered_delay_us(s_.opts.delay_comm_us, me_.rank)));
  ctx_.iteration++;
  if (timed) CUCO_CK(cudaEventRecord(start_, ctx_.stream));
  int rc = launch(&ctx_);
  cudaError_t launch_err = cudaGetLastError();
  // The harness joins the side stream, so work a candidate put there is inside the measured interval.
  cudaError_t join_err = cudaEventRecord(join_, ctx_.side_stream);
  if (join_err == cudaSuccess) join_err = cudaStreamWaitEvent(ctx_.stream, join_, 0);
  if (join_err == cudaSuccess && timed) join_err = cudaEventRecord(stop_, ctx_.stream);
  std::string why;
  if (launch_err != cudaSuccess) {
    if (is_sticky(launch_err)) throw_cuda(launch_err, "the candidate's launch", __FILE__, __LINE__);
    why = std::string("a kernel launch failed: ") + cudaGetErrorName(launch_err) + " (" +
          cudaGetErrorString(launch_err) + ")";
  } else if (rc != 0) {
    why = "the launch entry point returned " + std::to_string(rc);
  }
  // The candidate's own failure comes first: under graph capture it is the cause, the join's error its consequence.
  if (join_err != cudaSuccess) {
    if (why.empty() || is_sticky(join_err)) throw_cuda(join_err, "joining the side stream", __FILE__, __LINE__);
    why += std::string("; then joining the side stream: ") + cudaGetErrorName(join_err);
  }
  return why;
}

void Rank::warm_up() {
  Target h = Target::harness();
  enter(h, "warm-up");
  const cuco_part* compute = nullptr;
  for (const cuco_part& p : s_.parts)
    if (!p.is_comm) {
      compute = &p;
      break;
    }
  std::string err;
  if (compute)
    err = attempt(h, [&] {
      ctx_.has_devcomm = 0;
      const auto t0 = std::chrono::steady_clock::now();
      while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() <
             s_.opts.warm_ms) {
        for (int i = 0; i < 4; ++i) {
          int rc = compute->launch(&ctx_);
          if (rc != 0) CUCO_FAIL("the compute part returned " + std::to_string(rc) + " while warming up");
        }
        CUCO_CK(cudaStreamSynchronize(ctx_.stream));
      }
    });
  // A warm-up that fails is said and skipped: the parts' own timing records the failure where it counts.
  if (!err.empty()) std::fprintf(stderr, "cuco-harness: rank %d: warm-up: %s\n", me_.rank, err.c_str());
  s_.group.barrier();
}

void Rank::run_parts() {
  for (size_t k = 0; k < s_.parts.size(); ++k) {
    Target t = Target::part(static_cast<int>(k));
    ctx_.has_devcomm = 0;
    bench(t, s_.parts[k].launch);
  }
}

void Rank::run_candidate(int index) {
  Target t = Target::candidate(index);
  const std::string& path = s_.opts.candidates[index];
  enter(t, "load");
  CandidatePlugin c;
  if (!agreed(t, attempt(t, [&] { c = load_candidate(path); }), "error")) return;

  enter(t, "setup");
  cuco_requirements req{};
  std::string err = attempt(t, [&] {
    int rc = c.requirements(&ctx_, &req);
    if (rc != 0) CUCO_FAIL("cuco_candidate_requirements returned " + std::to_string(rc));
    if (req.lsa_barrier_count < 0 || req.gin_signal_count < 0 || req.gin_counter_count < 0 ||
        req.gin_context_count < 0)
      CUCO_FAIL("cuco_candidate_requirements set a negative count");
  });
  if (!agreed(t, err, "error")) return;
  // Collective allocations need the same sizes everywhere: take the maximum over ranks.
  std::vector<int64_t> m = s_.group.max(
      me_.rank, {req.lsa_barrier_count, req.gin_signal_count, req.gin_counter_count, req.gin_context_count,
                 req.gin_required, static_cast<int64_t>(req.workspace_bytes),
                 static_cast<int64_t>(req.symmetric_workspace_bytes), req.uses_nvshmem ? 1 : 0,
                 static_cast<int64_t>(req.nvshmem_workspace_bytes)});
  req.lsa_barrier_count = static_cast<int>(m[0]);
  req.gin_signal_count = static_cast<int>(m[1]);
  req.gin_counter_count = static_cast<int>(m[2]);
  req.gin_context_count = static_cast<int>(m[3]);
  req.gin_required = static_cast<int>(m[4]);
  req.workspace_bytes = static_cast<size_t>(m[5]);
  req.symmetric_workspace_bytes = static_cast<size_t>(m[6]);
  req.uses_nvshmem = static_cast<int>(m[7]);
  req.nvshmem_workspace_bytes = static_cast<size_t>(m[8]);
  if (records())
    s_.report.set_requirements(index, {{"lsa_barrier_count", m[0]}, {"gin_signal_count", m[1]},
                                       {"gin_counter_count", m[2]}, {"gin_context_count", m[3]},
                                       {"gin_required", m[4]}, {"workspace_bytes", m[5]},
                                       {"symmetric_workspace_bytes", m[6]}, {"uses_nvshmem", m[7]},
                                       {"nvshmem_workspace_bytes", m[8]}});
  if (req.uses_nvshmem) {  // collective: every rank brings NVSHMEM up (once per process) or all say why not
    std::string reason = NvshmemHost::instance().up(s_.group, me_.rank, s_.launch.world,
                                                    static_cast<int>(s_.launch.local_ranks.size()),
                                                    s_.opts.nvshmem_lib);
    if (!agreed(t, reason, "unsupported")) return;
  }
  if (req.gin_required) {
    std::string reason;
    err = attempt(t, [&] { reason = gin_unavailable_reason(); });
    if (!agreed(t, err, "error")) return;
    if (!agreed(t, reason, "unsupported")) return;
  }

  CandidateResources res;
  bool setup_called = false;
  note("allocating and registering its windows (collective)");
  bool ok = agreed(t, attempt(t, [&] { alloc_local(req, res); }), "error") &&
            agreed(t, attempt(t, [&] { register_symmetric(req, res); }), "error");
  if (ok) {
    ctx_.workspace = res.workspace;
    ctx_.workspace_bytes = req.workspace_bytes;
    ctx_.symmetric_workspace = {res.symmetric, req.symmetric_workspace_bytes, res.symmetric_window};
    ctx_.nvshmem_workspace = res.nvshmem;
    ctx_.nvshmem_workspace_bytes = res.nvshmem ? req.nvshmem_workspace_bytes : 0;
    ctx_.nvshmem_attr = req.uses_nvshmem ? NvshmemHost::instance().attr() : nullptr;
    ctx_.candidate_state = nullptr;
    std::string why;
    note("creating its device communicator (collective)");
    err = attempt(t, [&] { create_devcomm(req); });
    if (!s_.group.all_ok(me_.rank, err.empty(), err, &why)) {
      // A failed ncclDevCommCreate may leave the communicator unusable: end this process; the runner
      // starts a fresh one for the candidates that were not reached.
      std::string status = req.gin_required ? "unsupported" : "error";
      if (records()) s_.report.fatal(status, "ncclDevCommCreate failed: " + why, 5, "aborted");
      s_.group.barrier();
    }
    setup_called = true;
    note("in the candidate's setup, then waiting for its GPU");
    ok = agreed(t, attempt(t, [&] {
                  if (c.setup) {
                    int rc = c.setup(&ctx_);
                    if (rc != 0) CUCO_FAIL("cuco_candidate_setup returned " + std::to_string(rc));
                  }
                  CUCO_CK(cudaDeviceSynchronize());
                }),
                "error");
    if (ok && s_.opts.verify) ok = verify(t, c);
    if (ok && s_.opts.bench) ok = bench(t, c.launch);
    if (ok && !s_.opts.trace_dir.empty()) trace(t, c.launch, index);
    if (ok && s_.opts.graph_replays > 0) graph_replay(t, c);
  }

  enter(t, "teardown");
  note("in the candidate's teardown");
  err = attempt(t, [&] {
    if (c.teardown && setup_called) {
      int rc = c.teardown(&ctx_);
      if (rc != 0) CUCO_FAIL("cuco_candidate_teardown returned " + std::to_string(rc));
    }
  });
  ok = agreed(t, err, "error") && ok;
  note("at the barrier before releasing its windows");
  s_.group.barrier();  // nobody frees a window a peer may still read
  note("releasing its windows and workspaces");
  ok = agreed(t, attempt(t, [&] { release(res); }), "error") && ok;
  if (ok && records()) s_.report.set_status(t, "ok", "");
}

bool Rank::verify(Target t, const CandidatePlugin& c) {
  bool all_passed = true;
  std::string failures;
  for (uint64_t seed : s_.opts.seeds) {
    enter(t, "verify seed " + std::to_string(seed));
    if (!agreed(t, attempt(t, [&] { fill_and_poison(seed); }), "error")) return false;
    std::string launch_err;
    std::string err = attempt(t, [&] { launch_err = launch_joined(c.launch, false, true); });
    if (err.empty()) err = launch_err;
    // Agree before synchronising: if one rank's launch failed, the others' kernels may wait for it forever
    // and the watchdog ends the process with this candidate already marked "error".
    bool launched = agreed(t, err, "error");
    note("waiting for its GPU");
    // Only work ordered before the end of ctx->stream counts: sync that stream, not the device.
    err = attempt(t, [&] { CUCO_CK(cudaStreamSynchronize(ctx_.stream)); });
    if (!launched || !agreed(t, err, "error")) return false;

    cuco_check_result r{};
    err = attempt(t, [&] {
      int rc = s_.workload.check(&ctx_, seed, &r);
      if (rc != 0) CUCO_FAIL("cuco_workload_check returned " + std::to_string(rc));
      CUCO_CK(cudaDeviceSynchronize());
    });
    if (!agreed(t, err, "error")) return false;
    r.message[sizeof r.message - 1] = '\0';
    CheckRecord rec{seed, me_.rank, r.passed != 0, r.max_abs_err, r.rel_l2_err, r.n_checked, r.n_bad, r.n_nan,
                    r.message};
    // Every rank's check reaches the report (another process's included).
    std::vector<std::string> all = s_.group.allgather(me_.rank, encode_check(rec));
    if (records())
      for (const std::string& e : all) s_.report.add_check(t.index, decode_check(e));
    std::string mine;
    if (!r.passed) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "seed %llu: %lld of %lld elements wrong, %lld NaN/Inf, max_abs_err %.3g%s%s",
                    static_cast<unsigned long long>(seed), static_cast<long long>(r.n_bad),
                    static_cast<long long>(r.n_checked), static_cast<long long>(r.n_nan), r.max_abs_err,
                    r.message[0] ? ": " : "", r.message);
      mine = buf;
    }
    std::string why;
    if (!s_.group.all_ok(me_.rank, mine.empty(), mine, &why)) {
      all_passed = false;
      failures += (failures.empty() ? "" : "; ") + why;
    }
  }
  if (!all_passed && records()) s_.report.set_status(t, "verify_failed", failures);
  return all_passed;
}

std::string Rank::launch_timed(cuco_candidate_launch_fn launch) {
  const int n = s_.opts.launches_per_iteration;
  if (n == 1) return launch_joined(launch, true);
  // Back to back, as a training step enqueues them: the GPU runs ahead of the host after the first launch, and the
  // ranks' skew at the host barrier before the iteration is paid once per n launches, not once per launch.
  CUCO_CK(cudaEventRecord(start_, ctx_.stream));
  for (int i = 0; i < n; ++i) {
    std::string why = launch_joined(launch, false);
    if (!why.empty()) return why;
  }
  CUCO_CK(cudaEventRecord(stop_, ctx_.stream));
  return "";
}

bool Rank::bench(Target t, cuco_candidate_launch_fn launch) {
  enter(t, "bench");
  const Options& o = s_.opts;
  std::vector<double> times;
  std::string err;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    iteration_ = it;
    // The agreement before the launch is the host barrier that lines the ranks up; it stops every rank at the
    // first failure on any of them.
    if (!agreed(t, err, "error")) return false;
    note("enqueuing the candidate");
    std::string launch_err;
    err = attempt(t, [&] { launch_err = launch_timed(launch); });
    if (err.empty()) err = launch_err;
    // Agree before waiting, as verify does: a rank whose launch failed enqueued nothing, and its peers' kernels
    // would wait for it forever, a hang that hides the error. The barrier is outside the timed events.
    note(err.empty() ? "enqueued, at the host barrier" : err);
    if (!agreed(t, err, "error")) return false;
    note("waiting for its GPU");
    err = attempt(t, [&] {
      CUCO_CK(cudaEventSynchronize(stop_));
      float ms = 0;
      CUCO_CK(cudaEventElapsedTime(&ms, start_, stop_));
      if (it >= o.warmup) times.push_back(static_cast<double>(ms) / o.launches_per_iteration);
    });
  }
  if (!agreed(t, err, "error")) return false;
  std::vector<std::string> all = s_.group.allgather(me_.rank, encode_times(times));  // every rank's times
  if (records())
    for (int r = 0; r < static_cast<int>(all.size()); ++r) s_.report.set_times(t, r, decode_times(all[r]));
  return true;
}

}  // namespace cuco_harness
