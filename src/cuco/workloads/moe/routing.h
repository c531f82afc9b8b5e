// Seeded top-k routing with expert-load skew; bit-identical to routing.py (see its docstring for the rules).
#pragma once

#include <stdint.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace cuco_moe {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kRankMul = 0xD1B54A32D192ED03ull;
constexpr uint64_t kIndexMul = 0xBF58476D1CE4E5B9ull;
enum { STREAM_LABELS = 1, STREAM_TOKENS = 2, STREAM_GATES = 3 };

inline uint64_t mix64(uint64_t x) {
  x += kGolden;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t stream_key(uint64_t seed, uint64_t rank, uint64_t stream) {
  return mix64(seed * kGolden + rank * kRankMul + stream);
}

inline uint64_t rnd(uint64_t key, uint64_t i) { return mix64(key ^ (i * kIndexMul)); }

inline std::vector<int64_t> shuffle(int64_t n, uint64_t key) {
  std::vector<int64_t> a(n);
  std::iota(a.begin(), a.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(a[i], a[rnd(key, (uint64_t)i) % (uint64_t)(i + 1)]);
  return a;
}

inline std::vector<int64_t> slot_counts(int64_t tokens, int64_t experts, int64_t topk, int64_t skew) {
  const int64_t slots = tokens * topk, total = skew + experts - 1, other = slots / total;
  std::vector<int64_t> c(experts, other);
  c[0] = slots * skew / total;
  int64_t rem = slots - std::accumulate(c.begin(), c.end(), (int64_t)0);
  for (int64_t e = 1; e <= rem; ++e) c[e] += 1;
  return c;
}

// experts[t*K + j], gates[t*K + j] of source rank `rank` for `seed`.
inline void route(int64_t T, int64_t E, int64_t K, int64_t R, uint64_t seed, int rank, int32_t* experts,
                  float* gates) {
  std::vector<int64_t> counts = slot_counts(T, E, K, R);
  std::vector<int64_t> perm = shuffle(E - 1, stream_key(seed, (uint64_t)rank, STREAM_LABELS));
  std::vector<int32_t> sequence;
  sequence.reserve((size_t)(T * K));
  for (int64_t i = 0; i < E; ++i) {
    const int32_t label = i == 0 ? 0 : (int32_t)(1 + perm[i - 1]);
    sequence.insert(sequence.end(), (size_t)counts[i], label);
  }
  std::vector<int64_t> order = shuffle(T, stream_key(seed, (uint64_t)rank, STREAM_TOKENS));
  for (int64_t s = 0; s < T * K; ++s) {  // slot s of the column-major table: table token s % T, column s / T
    const int64_t tok = order[s % T], col = s / T;
    experts[tok * K + col] = sequence[(size_t)s];
  }
  const uint64_t gkey = stream_key(seed, (uint64_t)rank, STREAM_GATES);
  std::vector<float> u((size_t)(T * K));
  for (int64_t i = 0; i < T * K; ++i) u[i] = 0.5f + (float)(rnd(gkey, (uint64_t)i) >> 40) / 16777216.0f;
  for (int64_t t = 0; t < T; ++t) {
    float total = u[t * K];
    for (int64_t j = 1; j < K; ++j) total = total + u[t * K + j];
    for (int64_t j = 0; j < K; ++j) gates[t * K + j] = u[t * K + j] / total;
  }
}

}  // namespace cuco_moe
