// parallel_for: splits [0, count) across the persistent thread pool; the CPU paths' only threading primitive.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "src/core/thread_pool.h"

namespace convtune {

inline unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Calls body(i) for every i in [0, count) on up to `threads` threads of the shared pool, handing out indices
// dynamically so uneven work (border tiles, groups) balances. Rethrows the first exception a body threw; the
// other threads then stop taking new indices.
inline void parallel_for(int64_t count, unsigned threads, const std::function<void(int64_t)>& body) {
  threads = static_cast<unsigned>(std::min<int64_t>(threads, count));
  if (threads <= 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<int64_t> next{0};
  ThreadPool::instance().run(threads, [&](unsigned, unsigned) {
    try {
      for (int64_t i = next++; i < count; i = next++) body(i);
    } catch (...) {
      next = count;
      throw;
    }
  });
}

}  // namespace convtune
