// Bytes <-> lowercase hex text, for opaque ids that travel as text (the NCCL and NVSHMEM unique ids).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace cuco_harness {

inline std::string to_hex(const void* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<const unsigned char*>(p)[i];
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

// False (and *p partly written) unless `s` is exactly 2n hex digits.
inline bool from_hex(const std::string& s, void* p, size_t n) {
  if (s.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(v);
  }
  return true;
}

}  // namespace cuco_harness
