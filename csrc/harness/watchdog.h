// Deadlines for every phase and for the whole process. When one passes, the watchdog records "hang"
// for the phase's target, writes the JSON and ends the process with exit code 3: a kernel that spins
// forever cannot keep the harness alive, and the driver reclaims the GPUs when the process is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "report.h"

namespace cuco_harness {

class Watchdog {
 public:
  Watchdog(Report& report, double phase_timeout_s, double total_timeout_s);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Enter a phase: the report names it, and its deadline starts now.
  void enter(Target t, const std::string& phase);
  // Like enter, with an explicit deadline (e.g. teardown after a hang elsewhere needs less).
  void enter(Target t, const std::string& phase, double timeout_s);
  // What `rank` (of this process) is doing in `phase`'s `iteration`: a hang's message names each rank's last step,
  // so a rank stuck waiting for its GPU is told from one at a host barrier or one that failed. A step outlives
  // the phase it was noted in: a rank that never arrived in the phase that hangs is named where it stopped.
  void note(int rank, const std::string& phase, const std::string& step, int iteration);
  void stop();

 private:
  void loop();
  std::string steps_locked() const;

  struct Step {
    std::string phase, step;
    int iteration = -1;
  };
  std::map<int, Step> steps_;  // by rank, under mu_

  using Clock = std::chrono::steady_clock;
  Report& report_;
  double phase_timeout_s_;
  Clock::time_point total_deadline_;
  std::mutex mu_;
  std::condition_variable cv_;
  Clock::time_point deadline_;
  double armed_timeout_s_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cuco_harness
