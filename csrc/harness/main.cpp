// cuco-harness: runs candidates of one workload on `world` GPUs and writes the only result that counts.
//
// Exit codes: 0 every candidate was reached (each has its own status), 2 usage or setup error,
// 3 hang (watchdog), 4 crash (sticky CUDA error), 5 aborted after a device-communicator failure.
// Whatever candidates print is passed through and ignored.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "errors.h"
#include "group.h"
#include "nvshmem_host.h"
#include "options.h"
#include "plugins.h"
#include "rank.h"
#include "report.h"
#include "watchdog.h"

using namespace cuco_harness;

namespace {

std::vector<cuco_part> load_parts(const WorkloadPlugin& w) {
  std::vector<cuco_part> parts;
  if (!w.parts) return parts;
  const cuco_part* p = nullptr;
  int n = 0;
  int rc = w.parts(&p, &n);
  if (rc != 0) throw HarnessError("cuco_workload_parts returned " + std::to_string(rc), false);
  if (n < 0 || n > CUCO_MAX_PARTS || (n > 0 && !p))
    throw HarnessError("cuco_workload_parts gave " + std::to_string(n) + " parts (0.." +
                           std::to_string(CUCO_MAX_PARTS) + " allowed)", false);
  for (int i = 0; i < n; ++i) {
    cuco_part q = p[i];
    q.name[CUCO_NAME_LEN - 1] = '\0';
    if (!q.launch) throw HarnessError(std::string("part '") + q.name + "' has no launch function", false);
    parts.push_back(q);
  }
  return parts;
}

cuco_workload_desc describe(const WorkloadPlugin& w, const Options& o) {
  cuco_workload_desc d{};
  int rc = w.describe(o.dims.data(), static_cast<int>(o.dims.size()), o.world, &d);
  d.error[sizeof d.error - 1] = '\0';
  if (rc != 0)
    throw HarnessError("the workload rejected dims/world: " + std::string(d.error[0] ? d.error : "(no reason given)") +
                           " (cuco_workload_describe returned " + std::to_string(rc) + ")", false);
  if (d.nbuffers < 0 || d.nbuffers > CUCO_MAX_BUFFERS)
    throw HarnessError("cuco_workload_describe declared " + std::to_string(d.nbuffers) + " buffers (0.." +
                           std::to_string(CUCO_MAX_BUFFERS) + " allowed)", false);
  for (int i = 0; i < d.nbuffers; ++i) d.buffers[i].name[CUCO_NAME_LEN - 1] = '\0';
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  try {
    opts = parse_options(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuco-harness: %s\n", e.what());
    return 2;
  }
  // NCCL connects every channel when the communicator is created, never inside a collective. With lazy connection
  // (NCCL's default) a collective whose algorithm one rank has not connected yet connects inside its enqueue, a
  // bootstrap exchange its peer must join; in thread mode a peer whose own enqueue needed no connection is already
  // at the harness's next host agreement, and both wait for ever. Seen at W = 2 on H100 (NCCL 2.28.9): the host
  // seed's 128 MiB-per-rank AllGather after an LSA candidate, in the re-timing's second order; eager connection
  // ran it (benchmarks/results/w2/hang_probe/). The program harness sets the same (cuco.program.evaluator.RUN_ENV).
  setenv("NCCL_RUNTIME_CONNECT", "0", 1);
  Report report(opts);
  Watchdog watchdog(report, opts.timeout_s, opts.total_timeout_s);
  watchdog.enter(Target::harness(), "init");

  WorkloadPlugin workload;
  cuco_workload_desc desc{};
  std::vector<cuco_part> parts;
  Launch launch;
  try {
    int ndev = 0;
    CUCO_CK(cudaGetDeviceCount(&ndev));
    for (int d : opts.devices)
      if (d >= ndev)
        throw HarnessError("device " + std::to_string(d) + " does not exist (" + std::to_string(ndev) +
                               " visible); pass --devices with ordinals below " + std::to_string(ndev), false);
    workload = load_workload(opts.workload);
    desc = describe(workload, opts);
    if (opts.parts) parts = load_parts(workload);
  } catch (const std::exception& e) {
    report.fatal("error", e.what(), 2);
  }
  for (const cuco_part& p : parts) report.add_part(p.name, p.is_comm);

  std::unique_ptr<HostGroup> group_owner;
  try {
    if (opts.process_mode()) {
      // Bootstrap is bounded by the phase timeout: a rank that never comes up ends every other rank too.
      ncclUniqueId id{};
      auto link = std::make_unique<StarLink>(opts.world, opts.rank, opts.rendezvous, opts.timeout_s, &id);
      link->on_lost = [&report](const std::string& why) { report.fatal("crash", why, 4); };
      launch = make_process_launch(opts.devices, opts.rank, id);
      group_owner = std::make_unique<HostGroup>(launch.world, std::move(link));
    } else {
      launch = make_launch(opts.devices);
      group_owner = std::make_unique<HostGroup>(launch.world);
    }
  } catch (const std::exception& e) {
    report.fatal("error", e.what(), 2);
  }
  HostGroup& group = *group_owner;
  Shared shared{opts, launch, group, report, watchdog, workload, desc, parts};
  std::vector<std::thread> threads;
  for (const LocalRank& r : launch.local_ranks)
    threads.emplace_back([&shared, r] { Rank(shared, r).run(); });
  for (auto& th : threads) th.join();
  NvshmemHost::instance().finalize();  // after every rank's teardown (the result is already written)
  watchdog.stop();
  return 0;
}
