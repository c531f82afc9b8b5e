#include "group.h"

#include <sstream>

#include "errors.h"

namespace cuco_harness {

Launch make_launch(const std::vector<int>& devices) {
  Launch l;
  l.world = static_cast<int>(devices.size());
  l.local_world = l.world;
  for (int r = 0; r < l.world; ++r) l.local_ranks.push_back({r, r, devices[r]});
  CUCO_NK(ncclGetUniqueId(&l.id));
  return l;
}

Launch make_process_launch(const std::vector<int>& devices, int rank, const ncclUniqueId& id) {
  Launch l;
  l.world = static_cast<int>(devices.size());
  l.local_world = l.world;  // every rank process runs on this host (ranks.py starts them): one LSA team
  l.local_ranks.push_back({rank, rank, devices[rank]});
  l.id = id;
  return l;
}

HostGroup::HostGroup(int nranks) : n_(nranks), slots_(nranks) {}

HostGroup::HostGroup(int nranks, std::unique_ptr<StarLink> link)
    : n_(nranks), link_(std::move(link)), slots_(nranks) {}

void HostGroup::barrier() {
  if (link_) {
    link_->allgather(std::string());
    return;
  }
  std::unique_lock<std::mutex> lk(mu_);
  uint64_t gen = generation_;
  if (++arrived_ == n_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lk, [&] { return generation_ != gen; });
}

std::vector<std::string> HostGroup::allgather(int rank, const std::string& mine) {
  if (link_) return link_->allgather(mine);
  {
    std::lock_guard<std::mutex> lk(mu_);
    slots_[rank] = mine;
  }
  barrier();  // all slots written
  std::vector<std::string> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    all = slots_;
  }
  barrier();  // all slots read before anyone writes the next round
  return all;
}

bool HostGroup::all_ok(int rank, bool ok, const std::string& message, std::string* why) {
  std::vector<std::string> all = allgather(rank, ok ? std::string() : "!" + message);
  std::string msg;
  for (int r = 0; r < n_; ++r) {
    if (all[r].empty()) continue;
    if (!msg.empty()) msg += "; ";
    msg += "rank " + std::to_string(r) + ": " + all[r].substr(1);
  }
  if (why) *why = msg;
  return msg.empty();
}

std::vector<int64_t> HostGroup::max(int rank, const std::vector<int64_t>& mine) {
  std::ostringstream os;
  for (int64_t v : mine) os << v << ' ';
  std::vector<std::string> all = allgather(rank, os.str());
  std::vector<int64_t> out(mine);
  for (const auto& s : all) {
    std::istringstream is(s);
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v = 0;
      is >> v;
      if (v > out[i]) out[i] = v;
    }
  }
  return out;
}

}  // namespace cuco_harness
