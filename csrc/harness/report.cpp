#include "report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <unistd.h>

#include "json.h"
#include "timing.h"

namespace cuco_harness {
namespace {

std::string iso8601_utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

void write_timing(JsonWriter& w, const std::vector<std::vector<double>>& t, const Options& o) {
  bool complete = !t.empty();
  for (const auto& xs : t) complete = complete && !xs.empty();
  if (!complete) {  // not benchmarked (or not on every rank): no timing rather than a partial one
    w.null();
    return;
  }
  TimingSummary s = summarize(t);
  w.begin_object();
  w.key("per_rank_ms").begin_array();
  for (const auto& xs : t) w.array(xs);
  w.end_array();
  w.key("per_rank_median_ms").array(s.per_rank_median_ms);
  w.key("per_rank_min_ms").array(s.per_rank_min_ms);
  w.key("per_rank_p10_ms").array(s.per_rank_p10_ms);
  w.key("per_rank_p90_ms").array(s.per_rank_p90_ms);
  w.key("max_median_ms").value(s.max_median_ms);
  w.key("max_rank").value(s.max_rank);
  w.key("min_ms").value(s.min_ms);
  w.key("spread").value(s.spread);
  w.key("iters").value(static_cast<int>(t[0].size()));
  w.key("warmup").value(o.warmup);
  w.key("launches_per_iteration").value(o.launches_per_iteration);
  w.end_object();
}

bool is_failure(const std::string& s) { return !s.empty() && s != "ok"; }

void write_graph(JsonWriter& w, const RunRecord& c, const Options& o) {
  if (o.graph_replays <= 0) {  // not asked for
    w.null();
    return;
  }
  const GraphRecord& g = c.graph;
  bool reached = !g.status.empty();
  w.begin_object();
  w.key("replays").value(o.graph_replays);
  w.key("status").value(reached ? g.status : "not_run");
  w.key("failed_replay");
  if (g.failed_replay >= 0) w.value(g.failed_replay); else w.null();
  w.key("failed_seed");
  if (g.failed_replay >= 0) w.value(g.failed_seed); else w.null();
  std::string why = c.status == "not_run" ? c.message  // "not reached: <what ended the process>"
                    : is_failure(c.status) ? "not reached: the candidate's status is " + c.status
                                           : "not reached";
  w.key("reason").value(reached ? g.reason : why);
  w.end_object();
}

}  // namespace

Report::Report(const Options& opts)
    : opts_(opts), date_(iso8601_utc_now()), hostname_(host_name()), start_(std::chrono::steady_clock::now()) {
  for (const auto& c : opts.candidates) {
    RunRecord r;
    r.name = c;
    candidates_.push_back(r);
  }
  harness_.name = "harness";
}

void Report::set_device(const DeviceInfo& info) {
  std::lock_guard<std::mutex> lk(mu_);
  device_ = info;
}

int Report::add_part(const std::string& name, int is_comm) {
  std::lock_guard<std::mutex> lk(mu_);
  RunRecord r;
  r.name = name;
  r.is_comm = is_comm;
  parts_.push_back(r);
  return static_cast<int>(parts_.size()) - 1;
}

RunRecord& Report::record(Target t) {
  if (t.kind == Target::kPart) return parts_.at(t.index);
  if (t.kind == Target::kCandidate) return candidates_.at(t.index);
  return harness_;
}

void Report::set_phase(Target t, const std::string& phase) {
  std::lock_guard<std::mutex> lk(mu_);
  current_ = t;
  current_phase_ = phase;
  if (!sealed_) write_locked();
}

std::string Report::phase_label() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string who = "harness";
  if (current_.kind == Target::kPart) who = "part '" + parts_.at(current_.index).name + "'";
  if (current_.kind == Target::kCandidate)
    who = "candidate " + std::to_string(current_.index) + " (" + candidates_.at(current_.index).name + ")";
  return who + ", phase " + current_phase_;
}

void Report::set_status(Target t, const std::string& status, const std::string& message) {
  std::lock_guard<std::mutex> lk(mu_);
  RunRecord& r = record(t);
  if (is_failure(r.status)) return;
  r.status = status;
  r.message = message;
  r.phase = status == "ok" ? "" : current_phase_;
}

std::string Report::status(Target t) {
  std::lock_guard<std::mutex> lk(mu_);
  return record(t).status;
}

void Report::add_check(int candidate, const CheckRecord& c) {
  std::lock_guard<std::mutex> lk(mu_);
  candidates_.at(candidate).checks.push_back(c);
}

void Report::set_times(Target t, int rank, const std::vector<double>& ms) {
  std::lock_guard<std::mutex> lk(mu_);
  RunRecord& r = record(t);
  if (r.times_ms.size() < static_cast<size_t>(opts_.world)) r.times_ms.resize(opts_.world);
  r.times_ms.at(rank) = ms;
}

void Report::set_requirements(int candidate, const std::map<std::string, int64_t>& req) {
  std::lock_guard<std::mutex> lk(mu_);
  candidates_.at(candidate).requirements = req;
}

void Report::set_graph(int candidate, const GraphRecord& g) {
  std::lock_guard<std::mutex> lk(mu_);
  candidates_.at(candidate).graph = g;
}

void Report::set_harness_message(const std::string& message) {
  std::lock_guard<std::mutex> lk(mu_);
  message_ = message;
}

void Report::finish() {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& p : parts_)
    if (p.status.empty()) p.status = "ok";
  for (auto& c : candidates_)
    if (c.status.empty()) c.status = "error", c.message = "internal: the harness recorded no status";
  top_status_ = "ok";
  current_phase_ = "done";
  write_locked();
  sealed_ = true;
}

void Report::fatal(const std::string& status, const std::string& message, int exit_code,
                   const std::string& top_status) {
  mu_.lock();  // never released: the process ends while holding it, so nobody writes after us
  if (sealed_) {
    // The final result is already on disk; only teardown was left.
    std::fflush(nullptr);
    _exit(0);
  }
  std::string where = current_phase_;
  RunRecord& cur = record(current_);
  if (current_.kind == Target::kCandidate && cur.graph.status == "running") {
    // Verified (and timed) before the graph phase: the candidate keeps that; its graph record says what happened.
    cur.graph.status = status;
    cur.graph.reason = message;
    if (!is_failure(cur.status)) {
      cur.status = "ok";
      cur.message = "graph replay: " + status + ": " + message;
      cur.phase = "";
    }
  } else if (is_failure(cur.status)) {
    cur.message += "; then " + status + " in " + where + ": " + message;
  } else {
    cur.status = status;
    cur.message = message;
    cur.phase = where;
  }
  std::string cause = cur.name + " " + status + " in " + where;
  for (auto& p : parts_)
    if (p.status.empty()) p.status = "not_run", p.message = "not reached: " + cause;
  for (auto& c : candidates_)
    if (c.status.empty()) c.status = "not_run", c.message = "not reached: " + cause;
  top_status_ = top_status.empty() ? status : top_status;
  message_ = (current_.kind == Target::kHarness ? message : cause + ": " + message);
  write_locked();
  std::fflush(nullptr);
  _exit(exit_code);
}

std::string Report::json_locked() const {
  auto seed_index = [this](uint64_t seed) {
    for (size_t i = 0; i < opts_.seeds.size(); ++i)
      if (opts_.seeds[i] == seed) return i;
    return opts_.seeds.size();
  };
  JsonWriter w;
  w.begin_object();
  w.key("schema").value(1);
  w.key("status").value(top_status_);
  w.key("message").value(message_);
  w.key("device").value(device_.name);
  w.key("sm_count").value(device_.sm_count);
  w.key("driver_version").value(device_.driver_version);
  w.key("driver_release").value(device_.driver_release);
  w.key("cuda_runtime_version").value(device_.cuda_runtime_version);
  w.key("nccl_version").value(device_.nccl_version);
  w.key("nccl_header_version").value(device_.nccl_header_version);
  w.key("world").value(opts_.world);
  w.key("devices").array(opts_.devices);
  w.key("dims").array(opts_.dims);
  w.key("seeds").array(opts_.seeds);
  w.key("workload").value(opts_.workload);
  w.key("date").value(date_);
  w.key("hostname").value(hostname_);
  w.key("elapsed_s").value(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  w.key("current").begin_object();
  w.key("kind").value(current_.kind == Target::kCandidate ? "candidate"
                      : current_.kind == Target::kPart   ? "part"
                                                         : "harness");
  w.key("index").value(current_.index);
  w.key("phase").value(current_phase_);
  w.end_object();
  w.key("parts").begin_object();
  for (const auto& p : parts_) {
    w.key(p.name).begin_object();
    w.key("is_comm").value(p.is_comm != 0);
    w.key("status").value(p.status);
    w.key("message").value(p.message);
    w.key("timing");
    write_timing(w, p.times_ms, opts_);
    w.end_object();
  }
  w.end_object();
  w.key("candidates").begin_array();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const RunRecord& c = candidates_[i];
    w.begin_object();
    w.key("index").value(static_cast<int>(i));
    w.key("path").value(c.name);
    w.key("status").value(c.status);
    w.key("message").value(c.message);
    w.key("phase").value(c.phase);
    w.key("requirements").begin_object();
    for (const auto& kv : c.requirements) w.key(kv.first).value(kv.second);
    w.end_object();
    // Ranks add their checks concurrently: write them in (seed order, rank) order.
    std::vector<CheckRecord> checks = c.checks;
    std::stable_sort(checks.begin(), checks.end(), [&](const CheckRecord& a, const CheckRecord& b) {
      return seed_index(a.seed) != seed_index(b.seed) ? seed_index(a.seed) < seed_index(b.seed) : a.rank < b.rank;
    });
    w.key("checks").begin_array();
    for (const auto& k : checks) {
      w.begin_object();
      w.key("seed").value(k.seed);
      w.key("rank").value(k.rank);
      w.key("passed").value(k.passed);
      w.key("max_abs_err").value(k.max_abs_err);
      w.key("rel_l2_err").value(k.rel_l2_err);
      w.key("n_checked").value(k.n_checked);
      w.key("n_bad").value(k.n_bad);
      w.key("n_nan").value(k.n_nan);
      w.key("message").value(k.message);
      w.end_object();
    }
    w.end_array();
    w.key("timing");
    write_timing(w, c.times_ms, opts_);
    w.key("graph");
    write_graph(w, c, opts_);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

void Report::write_locked() {
  std::string text = json_locked();
  std::string tmp = opts_.out + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text << "\n";
    f.flush();
    if (!f) {
      std::fprintf(stderr, "cuco-harness: cannot write %s\n", tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), opts_.out.c_str()) != 0)
    std::fprintf(stderr, "cuco-harness: cannot rename %s to %s\n", tmp.c_str(), opts_.out.c_str());
}

}  // namespace cuco_harness
