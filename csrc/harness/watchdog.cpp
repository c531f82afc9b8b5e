#include "watchdog.h"

#include <cstdio>

namespace cuco_harness {

namespace {
std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}
}  // namespace

Watchdog::Watchdog(Report& report, double phase_timeout_s, double total_timeout_s)
    : report_(report),
      phase_timeout_s_(phase_timeout_s),
      total_deadline_(Clock::now() + seconds(total_timeout_s)),
      deadline_(Clock::now() + seconds(phase_timeout_s)),
      armed_timeout_s_(phase_timeout_s) {
  thread_ = std::thread([this] { loop(); });
}

Watchdog::~Watchdog() { stop(); }

void Watchdog::enter(Target t, const std::string& phase) { enter(t, phase, phase_timeout_s_); }

void Watchdog::enter(Target t, const std::string& phase, double timeout_s) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    deadline_ = Clock::now() + seconds(timeout_s);
    armed_timeout_s_ = timeout_s;
    // Steps are kept: a rank that never reached this phase is named where it last stood (its own phase said).
  }
  report_.set_phase(t, phase);
}

void Watchdog::note(int rank, const std::string& phase, const std::string& step, int iteration) {
  std::lock_guard<std::mutex> lk(mu_);
  steps_[rank] = Step{phase, step, iteration};
}

std::string Watchdog::steps_locked() const {
  std::string out;
  for (const auto& [rank, s] : steps_)
    out += "; rank " + std::to_string(rank) + ": " + s.phase +
           (s.iteration >= 0 ? " iteration " + std::to_string(s.iteration) : std::string()) + ", " + s.step;
  return out;
}

void Watchdog::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    cv_.wait_for(lk, std::chrono::milliseconds(50));
    if (stop_) return;
    Clock::time_point now = Clock::now();
    if (now < deadline_ && now < total_deadline_) continue;
    std::string msg = now >= deadline_
                          ? "no progress within the phase deadline of " + std::to_string(armed_timeout_s_) + " s"
                          : "the process deadline (--total-timeout-s) passed";
    msg += " (" + report_.phase_label() + steps_locked() + "); the process was ended";
    std::fprintf(stderr, "cuco-harness: hang: %s\n", msg.c_str());
    lk.unlock();
    report_.fatal("hang", msg, 3);
  }
}

}  // namespace cuco_harness
