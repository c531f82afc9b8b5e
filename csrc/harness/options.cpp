#include "options.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace cuco_harness {
namespace {

template <typename T>
std::vector<T> parse_list(const std::string& flag, const std::string& text) {
  std::vector<T> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    errno = 0;
    // Unsigned lists (seeds) take the whole 64-bit range: the top bit of a seed selects full-entropy inputs.
    const bool negative = item.find('-') != std::string::npos;
    unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    const unsigned long long most = std::is_unsigned<T>::value ? ~0ull : (unsigned long long)LLONG_MAX;
    if (end == item.c_str() || *end != '\0' || negative || errno == ERANGE || v > most)
      throw std::invalid_argument(flag + " takes comma-separated non-negative integers, got '" + text + "'");
    out.push_back(static_cast<T>(v));
  }
  if (out.empty()) throw std::invalid_argument(flag + " needs at least one value");
  return out;
}

long long parse_int(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0') throw std::invalid_argument(flag + " takes an integer, got '" + text + "'");
  return v;
}

double parse_double(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v >= 0))
    throw std::invalid_argument(flag + " takes a non-negative number, got '" + text + "'");
  return v;
}

}  // namespace

double Options::derived_total_timeout_s() const {
  // init + parts + per candidate (load, setup, each seed, bench, trace, graph, teardown), each bounded by timeout_s.
  double phases = 2.0 + (parts ? 2.0 : 0.0) + (warm_ms > 0 ? 1.0 : 0.0) +
                  candidates.size() * (4.0 + (verify ? seeds.size() : 0) + (trace_dir.empty() ? 0 : 1) +
                                       (graph_replays > 0 ? 1 : 0));
  return phases * timeout_s;
}

std::string usage() {
  return "usage: cuco-harness --workload W.so --candidate C.so [--candidate C2.so ...] --dims D1,D2,... --world N\n"
         "         [--devices 0,1] [--seeds 1,2] [--verify 1] [--bench 1] [--warmup 5] [--iters 30] [--parts 0]\n"
         "         [--timeout-s 120] [--total-timeout-s T] [--delay-comm-us 0] --out result.json\n"
         "         [--rank R --rendezvous DIR]  (process mode: this process runs rank R; one process per rank)\n"
         "         [--trace DIR]  (CUPTI timeline of a few untimed launches per candidate, into DIR)\n"
         "         [--nvshmem-lib PATH]  (libnvshmem_host.so.3, for candidates that declare uses_nvshmem)\n"
         "         [--warm-ms 0]  (with --parts 1: run the compute part this long before anything is timed)\n"
         "         [--graph-replays 0]  (capture one delayed launch per candidate in a CUDA graph, replay and check it\n"
         "                               N times with fresh inputs; the result's per-candidate \"graph\")\n"
         "         [--launches-per-iteration 1]  (each timed iteration: N launches back to back, no host barrier\n"
         "                                        between them, one event pair; its time is the total / N)\n";
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw std::invalid_argument(usage());
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value\n" + usage());
    std::string v = argv[++i];
    if (flag == "--workload") o.workload = v;
    else if (flag == "--candidate") o.candidates.push_back(v);
    else if (flag == "--dims") o.dims = parse_list<int64_t>(flag, v);
    else if (flag == "--world") o.world = static_cast<int>(parse_int(flag, v));
    else if (flag == "--devices") o.devices = parse_list<int>(flag, v);
    else if (flag == "--seeds") o.seeds = parse_list<uint64_t>(flag, v);
    else if (flag == "--verify") o.verify = parse_int(flag, v) != 0;
    else if (flag == "--bench") o.bench = parse_int(flag, v) != 0;
    else if (flag == "--warmup") o.warmup = static_cast<int>(parse_int(flag, v));
    else if (flag == "--iters") o.iters = static_cast<int>(parse_int(flag, v));
    else if (flag == "--parts") o.parts = parse_int(flag, v) != 0;
    else if (flag == "--timeout-s") o.timeout_s = parse_double(flag, v);
    else if (flag == "--total-timeout-s") o.total_timeout_s = parse_double(flag, v);
    else if (flag == "--out") o.out = v;
    else if (flag == "--delay-comm-us") o.delay_comm_us = parse_double(flag, v);
    else if (flag == "--rank") o.rank = static_cast<int>(parse_int(flag, v));
    else if (flag == "--rendezvous") o.rendezvous = v;
    else if (flag == "--trace") o.trace_dir = v;
    else if (flag == "--nvshmem-lib") o.nvshmem_lib = v;
    else if (flag == "--warm-ms") o.warm_ms = parse_double(flag, v);
    else if (flag == "--graph-replays") {
      long long n = parse_int(flag, v);
      if (n < 0 || n > kMaxGraphReplays)
        throw std::invalid_argument("--graph-replays must be between 0 (off) and " + std::to_string(kMaxGraphReplays) +
                                    ", got '" + v + "'");
      o.graph_replays = static_cast<int>(n);
    }
    else if (flag == "--launches-per-iteration") {
      long long n = parse_int(flag, v);
      if (n < 1 || n > kMaxLaunchesPerIteration)
        throw std::invalid_argument("--launches-per-iteration must be between 1 and " +
                                    std::to_string(kMaxLaunchesPerIteration) + ", got '" + v + "'");
      o.launches_per_iteration = static_cast<int>(n);
    }
    else throw std::invalid_argument("unknown flag " + flag + "\n" + usage());
  }
  if (o.workload.empty()) throw std::invalid_argument("--workload is required\n" + usage());
  if (o.out.empty()) throw std::invalid_argument("--out is required\n" + usage());
  if (o.dims.empty()) throw std::invalid_argument("--dims is required\n" + usage());
  if (o.dims.size() > 8) throw std::invalid_argument("--dims takes at most 8 sizes (CUCO_MAX_DIMS)");
  if (o.world < 1) throw std::invalid_argument("--world must be >= 1\n" + usage());
  if (o.devices.empty())
    for (int r = 0; r < o.world; ++r) o.devices.push_back(r);
  if (static_cast<int>(o.devices.size()) != o.world)
    throw std::invalid_argument("--devices lists " + std::to_string(o.devices.size()) + " devices but --world is " +
                                std::to_string(o.world) + "; give one device per rank");
  if (o.warmup < 0) throw std::invalid_argument("--warmup must be >= 0");
  if (o.warm_ms > 60000) throw std::invalid_argument("--warm-ms must be at most 60000 (a minute)");
  if (o.bench && o.iters < 1) throw std::invalid_argument("--iters must be >= 1 when --bench 1");
  if (o.timeout_s <= 0) throw std::invalid_argument("--timeout-s must be > 0");
  if (o.delay_comm_us < 0 || o.delay_comm_us > 1e6)
    throw std::invalid_argument("--delay-comm-us must be between 0 and 1000000 (one second)");
  if (o.rank < -1 || o.rank >= o.world)
    throw std::invalid_argument("--rank " + std::to_string(o.rank) + " must be in 0.." + std::to_string(o.world - 1) +
                                " (or left out: every rank as a thread of this process)");
  if (o.process_mode() != !o.rendezvous.empty())
    throw std::invalid_argument("--rank and --rendezvous go together: give both (process mode) or neither");
  if (o.total_timeout_s <= 0) o.total_timeout_s = o.derived_total_timeout_s();
  return o;
}

}  // namespace cuco_harness
