#include "star.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
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

bool send_file(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t k = ::write(fd, s.data() + done, s.size() - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    done += static_cast<size_t>(k);
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

// A joining rank proves it read the rendezvous file (mode 0600): the token of that file, then its rank.
constexpr size_t kTokenBytes = 16;
constexpr size_t kHelloBytes = kTokenBytes + sizeof(int32_t);
// A connection that has not said hello within this time is dropped, so a silent client cannot hold rank 0.
constexpr double kHelloSeconds = 5.0;
// Connections waiting for their hello at once; more are refused (a flood cannot exhaust rank 0's descriptors).
constexpr size_t kMaxPending = 64;

void random_bytes(unsigned char* p, size_t n) {
  std::ifstream f("/dev/urandom", std::ios::binary);
  if (!f.read(reinterpret_cast<char*>(p), static_cast<std::streamsize>(n)))
    throw HarnessError("rank 0 could not read /dev/urandom for the rendezvous token", false);
}

bool same_token(const unsigned char* a, const unsigned char* b) {
  unsigned char diff = 0;  // every byte compared: the time taken says nothing about the token
  for (size_t i = 0; i < kTokenBytes; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

struct Pending {
  int fd;
  Clock::time_point until;
  unsigned char hello[kHelloBytes];
  size_t have;
};

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
    unsigned char token[kTokenBytes];
    random_bytes(token, sizeof token);
    const std::string tmp = path + ".tmp";
    {
      // readable by this user only: the token in it is what lets a process join the group
      int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      const std::string line = std::to_string(ntohs(a.sin_port)) + ' ' + to_hex(id, sizeof *id) + ' ' +
                               to_hex(token, sizeof token) + '\n';
      bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 && send_file(fd, line);
      if (fd >= 0) ::close(fd);
      if (!ok) throw HarnessError("rank 0 could not write " + tmp + ": make the rendezvous folder writable", false);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw HarnessError(sys_error("rank 0 could not publish " + path), false);
    accept_ranks(deadline, timeout_s, token);
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
  std::string idhex, tokenhex;
  unsigned char hello[kHelloBytes];
  if (!(is >> port >> idhex >> tokenhex) || port <= 0 || port > 65535 || !from_hex(idhex, id, sizeof *id) ||
      !from_hex(tokenhex, hello, kTokenBytes))
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
  std::memcpy(hello + kTokenBytes, &me, sizeof me);
  if (!send_all(fd, hello, sizeof hello)) {
    ::close(fd);
    throw HarnessError("rank 0 closed the connection during bootstrap", false);
  }
  fds_[0] = fd;
}

void StarLink::accept_ranks(Clock::time_point deadline, double timeout_s, const unsigned char* token) {
  std::vector<Pending> pending;
  for (int joined = 1; joined < world_;) {
    double left = seconds_left(deadline);
    if (left <= 0) {
      for (const Pending& c : pending) ::close(c.fd);
      std::string missing;
      for (int q = 1; q < world_; ++q)
        if (fds_[q] < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(q);
      throw HarnessError("rank(s) " + missing + " did not join within " + std::to_string((int)timeout_s) +
                         " s: their process died during bootstrap or was never started (see its output)", false);
    }
    std::vector<pollfd> polled{{listen_fd_, POLLIN, 0}};
    for (const Pending& c : pending) {
      polled.push_back({c.fd, POLLIN, 0});
      left = std::min(left, seconds_left(c.until));
    }
    int r = ::poll(polled.data(), polled.size(), static_cast<int>(std::max(left, 0.0) * 1000) + 1);
    if (r < 0 && errno != EINTR) throw HarnessError(sys_error("rank 0 could not wait for the other ranks"), false);
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending c = pending[i];
      bool done = false, keep = false;
      if (r > 0 && (polled[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t k = ::recv(c.fd, c.hello + c.have, kHelloBytes - c.have, MSG_DONTWAIT);
        if (k > 0) c.have += static_cast<size_t>(k);
        done = c.have == kHelloBytes;
        keep = k > 0 || (k < 0 && (errno == EAGAIN || errno == EINTR));
      } else {
        keep = true;
      }
      int32_t who = -1;
      if (done) std::memcpy(&who, c.hello + kTokenBytes, sizeof who);
      if (done && same_token(c.hello, token) && who > 0 && who < world_ && fds_[who] < 0) {
        int one = 1;
        ::setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fds_[who] = c.fd;
        ++joined;
      } else if (!done && keep && Clock::now() < c.until) {
        still.push_back(c);
      } else {
        ::close(c.fd);  // not one of ours: no token, a wrong one, a duplicate, silent too long or gone
      }
    }
    pending.swap(still);
    if (r > 0 && (polled[0].revents & POLLIN)) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0 && pending.size() < kMaxPending) {
        Pending c{};
        c.fd = fd;
        c.until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kHelloSeconds));
        pending.push_back(c);
      } else if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  for (const Pending& c : pending) ::close(c.fd);
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
