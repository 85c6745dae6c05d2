// ThreadPool: the process's persistent worker threads, so a parallel loop costs a wake-up, not thread creation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace convtune {

// Workers are created once (hardware threads - 1 of them; the calling thread is the last participant) and wait
// for jobs: a short spin after each job keeps back-to-back small loops (a network's layers) from paying a sleep
// and wake-up each, then they block on a condition variable so an idle pool costs no CPU.
class ThreadPool {
 public:
  // The shared pool. Created on first use, with CONVTUNE_THREADS threads (the caller included) when that is set,
  // else one per hardware thread; a value that is not a number from 1 to 4096 throws InvalidArgument.
  static ThreadPool& instance();

  explicit ThreadPool(unsigned workers);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads a job can use: the workers plus the caller.
  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  // Calls body(t, participants) once for each t in [0, participants), participants = min(threads, size()),
  // the caller running t = 0. Returns when all calls have returned; rethrows the first exception one threw.
  // A call made while the pool is busy (from inside a body, or from another thread at the same time) runs all
  // participants' bodies on the calling thread instead: nested loops never deadlock. Participants that no worker
  // has started by the time the caller's own call returns run on the caller too (each exactly once either way).
  void run(unsigned threads, const std::function<void(unsigned, unsigned)>& body);

 private:
  void worker_loop(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;      // guards the job fields below and the condition variables
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(unsigned, unsigned)>* body_ = nullptr;
  unsigned participants_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped per job; workers compare it to the last one they ran
  std::atomic<unsigned> pending_{0};     // worker calls of the current job not finished yet
  std::vector<bool> claimed_;            // per worker: its participant of the current job taken (guarded by mutex_)
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace convtune
