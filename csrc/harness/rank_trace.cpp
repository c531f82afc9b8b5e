// A candidate's timeline: three launches under CUPTI (after one whose records are dropped), written as
// <trace_dir>/candidate<i>[.rank<r>].json.
#include <cstdio>
#include <fstream>

#include "rank.h"
#include "trace.h"

namespace cuco_harness {

std::string Rank::launches_agreed(Target t, cuco_candidate_launch_fn launch, int n) {
  std::string err = attempt(t, [&] {
    for (int i = 0; i < n; ++i) {
      std::string e = launch_joined(launch, false);
      if (!e.empty()) CUCO_FAIL(e);
    }
  });
  std::string why;
  if (!s_.group.all_ok(me_.rank, err.empty(), err, &why)) return why;
  err = attempt(t, [&] { CUCO_CK(cudaStreamSynchronize(ctx_.stream)); });
  return s_.group.all_ok(me_.rank, err.empty(), err, &why) ? std::string() : why;
}

void Rank::trace(Target t, cuco_candidate_launch_fn launch, int index) {
  constexpr int kTracedLaunches = 3;
  enter(t, "trace");
  Tracer& tracer = Tracer::instance();
  std::string err;
  if (records()) {  // CUPTI is per process: one rank of each process switches it on and off
    err = tracer.load();
    if (err.empty()) err = tracer.start();
  }
  bool on = s_.group.all_ok(me_.rank, err.empty(), err, &err);
  std::string run_err;
  if (on) {
    // One launch first whose records are dropped: CUPTI's first instrumented launch pays one-off costs
    // (milliseconds of idle before the first kernel) that are not the candidate's.
    run_err = launches_agreed(t, launch, 1);
    s_.group.barrier();
    if (records()) tracer.discard();
    s_.group.barrier();
  }
  if (on && run_err.empty()) run_err = launches_agreed(t, launch, kTracedLaunches);
  s_.group.barrier();  // every rank's launches are done before the records are collected
  if (records() && on) {
    std::string stop_err = tracer.stop();
    std::vector<std::pair<int, int>> devices;
    for (const LocalRank& r : s_.launch.local_ranks) devices.push_back({r.device, r.rank});
    std::string path = s_.opts.trace_dir + "/candidate" + std::to_string(index) +
                       (s_.opts.process_mode() ? ".rank" + std::to_string(me_.rank) : std::string()) + ".json";
    std::ofstream f(path);
    f << trace_json(tracer.take(), devices);
    if (!f || !stop_err.empty()) err = stop_err.empty() ? "cannot write " + path : stop_err;
  }
  if (!err.empty() || !run_err.empty())
    std::fprintf(stderr, "cuco-harness: rank %d: no timeline for candidate %d: %s%s\n", me_.rank, index,
                 err.c_str(), run_err.c_str());
  s_.group.barrier();
}

}  // namespace cuco_harness
