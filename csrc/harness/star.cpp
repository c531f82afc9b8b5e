#include "star.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "errors.h"
#include "hexcode.h"

namespace cuco_harness {

namespace {

using Clock = std::chrono::steady_clock;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

// All of buf, or false (peer gone).
bool send_all(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_str(int fd, const std::string& s) {
  uint64_t n = s.size();
  return send_all(fd, &n, sizeof n) && send_all(fd, s.data(), s.size());
}

bool recv_str(int fd, std::string* s) {
  uint64_t n = 0;
  if (!recv_all(fd, &n, sizeof n) || n > (1ull << 30)) return false;
  s->assign(static_cast<size_t>(n), '\0');
  return recv_all(fd, &(*s)[0], static_cast<size_t>(n));
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

}  // namespace

std::string StarLink::rendezvous_path(const std::string& dir) { return dir + "/rendezvous"; }

StarLink::StarLink(int world, int rank, const std::string& dir, double timeout_s, ncclUniqueId* id)
    : world_(world), rank_(rank), fds_(world, -1) {
  if (world < 1 || rank < 0 || rank >= world)
    throw HarnessError("--rank " + std::to_string(rank) + " must be in 0.." + std::to_string(world - 1), false);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  const std::string path = rendezvous_path(dir);
  if (rank == 0) {
    CUCO_NK(ncclGetUniqueId(id));
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw HarnessError(sys_error("rank 0 could not open a socket"), false);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;  // ephemeral: never "in use"
    socklen_t len = sizeof a;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, world) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw HarnessError(sys_error("rank 0 could not listen on 127.0.0.1 (is loopback up?)"), false);
    const std::string tmp = path + ".tmp";
    {
      std::ofstream f(tmp);
      f << ntohs(a.sin_port) << ' ' << to_hex(id, sizeof *id) << '\n';
      if (!f) throw HarnessError("rank 0 could not write " + tmp + ": make the rendezvous folder writable", false);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw HarnessError(sys_error("rank 0 could not publish " + path), false);
    for (int joined = 1; joined < world;) {
      pollfd p{listen_fd_, POLLIN, 0};
      double left = seconds_left(deadline);
      int r = left > 0 ? ::poll(&p, 1, static_cast<int>(left * 1000) + 1) : 0;
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        std::string missing;
        for (int q = 1; q < world; ++q)
          if (fds_[q] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
        throw HarnessError("rank(s) " + missing + " did not join within " + std::to_string((int)timeout_s) +
                           " s: their process died during bootstrap or was never started (see its output)", false);
      }
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      int32_t who = -1;
      if (!recv_all(fd, &who, sizeof who) || who <= 0 || who >= world || fds_[who] >= 0) {
        ::close(fd);
        continue;  // not one of ours (or a duplicate): ignore it
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fds_[who] = fd;
      ++joined;
    }
    return;
  }
  // rank > 0: wait for the file, then connect.
  std::string line;
  while (true) {
    std::ifstream f(path);
    if (f && std::getline(f, line) && !line.empty()) break;
    if (seconds_left(deadline) <= 0)
      throw HarnessError("no rendezvous file " + path + " after " + std::to_string((int)timeout_s) +
                         " s: rank 0's process died during bootstrap or uses another --rendezvous folder", false);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::istringstream is(line);
  int port = 0;
  std::string idhex;
  if (!(is >> port >> idhex) || port <= 0 || port > 65535 || !from_hex(idhex, id, sizeof *id))
    throw HarnessError("the rendezvous file " + path + " is malformed: remove the folder and start again", false);
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw HarnessError(sys_error("rank " + std::to_string(rank) + " could not open a socket"), false);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  while (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (seconds_left(deadline) <= 0) {
      ::close(fd);
      throw HarnessError(sys_error("rank " + std::to_string(rank) + " could not reach rank 0 on 127.0.0.1:" +
                                   std::to_string(port) + " (did rank 0's process end?)"), false);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int32_t me = rank;
  if (!send_all(fd, &me, sizeof me)) {
    ::close(fd);
    throw HarnessError("rank 0 closed the connection during bootstrap", false);
  }
  fds_[0] = fd;
}

StarLink::~StarLink() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void StarLink::lost(int peer, const std::string& what) {
  std::string msg = "rank " + std::to_string(peer) + "'s process went away (" + what +
                    "): it crashed, hung past its timeout or was killed; its own result says why";
  if (on_lost) on_lost(msg);
  std::fprintf(stderr, "cuco-harness: %s\n", msg.c_str());
  std::fflush(nullptr);
  _exit(4);
}

std::vector<std::string> StarLink::allgather(const std::string& mine) {
  std::vector<std::string> all(world_);
  if (rank_ != 0) {
    if (!send_str(fds_[0], mine)) lost(0, "send failed");
    for (int q = 0; q < world_; ++q)
      if (!recv_str(fds_[0], &all[q])) lost(0, "connection closed");
    return all;
  }
  all[0] = mine;
  for (int q = 1; q < world_; ++q)
    if (!recv_str(fds_[q], &all[q])) lost(q, "connection closed");
  for (int q = 1; q < world_; ++q)
    for (int k = 0; k < world_; ++k)
      if (!send_str(fds_[q], all[k])) lost(q, "send failed");
  return all;
}

}  // namespace cuco_harness
