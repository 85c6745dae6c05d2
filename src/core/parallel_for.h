// parallel_for: splits [0, count) across hardware threads; the CPU paths' only threading primitive.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace convtune {

inline unsigned hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

// Calls body(i) for every i in [0, count) on up to `threads` threads, handing out indices dynamically so
// uneven work (border tiles, groups) balances. Rethrows the first exception a worker threw.
inline void parallel_for(int64_t count, unsigned threads, const std::function<void(int64_t)>& body) {
  threads = static_cast<unsigned>(std::min<int64_t>(threads, count));
  if (threads <= 1) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    try {
      for (int64_t i = next++; i < count; i = next++) body(i);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace convtune
