// Host-side exchange between rank processes (process-per-rank mode): a star over TCP on loopback.
//
// Rank 0 listens on 127.0.0.1 (an ephemeral port, so no port is ever "in use"), publishes the port and the
// NCCL unique id in a rendezvous file (written to a temp name, then renamed: readers never see half a file),
// and accepts the other ranks. The file (mode 0600) also holds a random token: a connection joins only by sending
// it with a free rank, and only within a few seconds, so neither another local process nor a silent client can
// take a rank's place or hold rank 0. An allgather is: every rank sends its string to rank 0, rank 0 sends all of
// them back. A peer whose process ends closes its socket: the next exchange reports it through `on_lost`
// (which ends this process with a result naming the rank), so a dead rank takes the group down.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nccl.h>

namespace cuco_harness {

class StarLink {
 public:
  // Joins the group as `rank` of `world` through the rendezvous file in `dir`, waiting at most `timeout_s`
  // for the others (rank 0) or for the file (rank > 0). Rank 0 creates the NCCL unique id; every rank
  // returns with it in *id. Throws HarnessError naming the cause and the fix.
  StarLink(int world, int rank, const std::string& dir, double timeout_s, ncclUniqueId* id);
  ~StarLink();
  StarLink(const StarLink&) = delete;
  StarLink& operator=(const StarLink&) = delete;

  // Every rank's string, indexed by rank (every rank calls it, in the same order).
  std::vector<std::string> allgather(const std::string& mine);
  // Called (instead of returning) when a peer's connection is lost; must not return.
  std::function<void(const std::string&)> on_lost;

  static std::string rendezvous_path(const std::string& dir);

 private:
  [[noreturn]] void lost(int peer, const std::string& what);
  // Rank 0: accepts the other ranks until all joined or `deadline`; only a connection that sends the rendezvous
  // file's token and a free rank within a few seconds joins.
  void accept_ranks(std::chrono::steady_clock::time_point deadline, double timeout_s, const unsigned char* token);
  int world_, rank_;
  int listen_fd_ = -1;
  std::vector<int> fds_;  // rank 0: one per peer (index = rank); others: fds_[0] is the link to rank 0
};

}  // namespace cuco_harness
