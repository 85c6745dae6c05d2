// ThreadPool: persistent workers woken per job (spin briefly, then sleep), nested or concurrent jobs run inline.
#include "src/core/thread_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "convtune/error.h"

namespace convtune {

namespace {

// Set on pool workers and on a caller while its job runs: a job started from there runs inline.
thread_local bool in_pool_job = false;

// How long a worker keeps polling for the next job before it sleeps. Long enough to cover the gap between two
// layers of a network or two timed repeats; short enough that an idle process gives its cores back at once.
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

ThreadPool& ThreadPool::instance() {
  // CONVTUNE_THREADS caps the threads (the caller included), e.g. to time one core; default: every hardware
  // thread.
  static ThreadPool pool([] {
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    if (const char* env = std::getenv("CONVTUNE_THREADS"); env && *env) {
      char* end = nullptr;
      const long wanted = std::strtol(env, &end, 10);
      // A typo must not silently run on every core (or one): timings would be taken for what was not asked.
      if (*end != '\0' || wanted < 1 || wanted > 4096) {
        throw InvalidArgument(fmt::format("CONVTUNE_THREADS='{}' is invalid: expected a number of threads from 1 to "
                                          "4096 (the calling thread included)",
                                          env));
      }
      threads = static_cast<unsigned>(wanted);
    }
    return threads - 1;
  }());
  return pool;
}

ThreadPool::ThreadPool(unsigned workers) {
  claimed_.assign(workers, false);
  workers_.reserve(workers);
  for (unsigned i = 0; i < workers; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(unsigned threads, const std::function<void(unsigned, unsigned)>& body) {
  const unsigned participants = std::max(1u, std::min(threads, size()));
  std::unique_lock run_lock(run_mutex_, std::defer_lock);
  if (participants == 1 || in_pool_job || !run_lock.try_lock()) {
    // Serial: one participant, or nested/concurrent use. The same calls, so results do not depend on it.
    for (unsigned t = 0; t < participants; ++t) body(t, participants);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    body_ = &body;
    participants_ = participants;
    error_ = nullptr;
    std::fill(claimed_.begin(), claimed_.end(), false);
    pending_.store(participants - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  in_pool_job = true;
  std::exception_ptr mine;
  try {
    body(0, participants);
  } catch (...) {
    mine = std::current_exception();
  }
  // Participants no worker has claimed yet run here, now, instead of being waited for. A worker may start a job
  // milliseconds late: woken from its sleep, or sharing its core with another process's busy thread (libgomp's
  // workers, oneDNN's, spin 7-11 ms of CPU after each parallel region, measured here). A caller that sat idle until
  // then would read fmnist1 backward-filter's 0.5 ms job at 2.5-3.7 ms when timed right after oneDNN.
  std::vector<unsigned> stolen;
  {
    std::lock_guard lock(mutex_);
    for (unsigned i = 0; i + 1 < participants; ++i)
      if (!claimed_[i]) claimed_[i] = true, stolen.push_back(i + 1);
  }
  for (unsigned t : stolen) {
    try {
      body(t, participants);
    } catch (...) {
      if (!mine) mine = std::current_exception();
    }
  }
  in_pool_job = false;
  if (!stolen.empty()) pending_.fetch_sub(static_cast<unsigned>(stolen.size()), std::memory_order_acq_rel);
  // Poll first (the workers usually finish together with the caller), then sleep. Polling yields: on a busy
  // machine a worker may wait on this very core, and a caller spinning without yielding would hold it off.
  const auto spin_until = std::chrono::steady_clock::now() + kSpin;
  while (pending_.load(std::memory_order_acquire) != 0 && std::chrono::steady_clock::now() < spin_until) {
    std::this_thread::yield();
  }
  if (pending_.load(std::memory_order_acquire) != 0) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    body_ = nullptr;
    error = mine ? mine : error_;
  }
  if (error) std::rethrow_exception(error);
}

void ThreadPool::worker_loop(unsigned index) {
  in_pool_job = true;
  uint64_t seen = 0;
  for (;;) {
    // Poll for a new job for a while, then wait on the condition variable.
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < spin_until) {
      std::this_thread::yield();
    }
    const std::function<void(unsigned, unsigned)>* body = nullptr;
    unsigned participants = 0;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_) return;
      seen = generation_.load(std::memory_order_acquire);
      body = body_;
      participants = participants_;
      // Worker i is participant i + 1; workers beyond this job's participants skip it, and so does a worker whose
      // participant the caller has already run (claimed under this lock, so exactly one of them runs it).
      if (body != nullptr && index + 1 < participants) {
        if (claimed_[index]) body = nullptr;
        claimed_[index] = true;
      }
    }
    const unsigned t = index + 1;
    if (body == nullptr || t >= participants) continue;
    try {
      (*body)(t, participants);
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);
      done_.notify_all();
    }
  }
}

}  // namespace convtune
