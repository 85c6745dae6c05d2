// The persistent thread pool behind parallel_for: every index once, nested and concurrent loops, exceptions,
// and that a tiny loop costs a wake-up rather than thread creation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "src/core/parallel_for.h"
#include "src/core/thread_pool.h"

using namespace convtune;

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int64_t count : {0, 1, 2, 3, 17, 1000}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
    parallel_for(count, 8, [&](int64_t i) { hits[static_cast<size_t>(i)]++; });
    for (int64_t i = 0; i < count; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i;
  }
}

TEST(ThreadPool, RunGivesEachParticipantItsIndex) {
  ThreadPool& pool = ThreadPool::instance();
  std::vector<std::atomic<int>> seen(pool.size());
  std::atomic<unsigned> reported{0};
  pool.run(pool.size(), [&](unsigned t, unsigned n) {
    seen[t]++;
    reported = n;
  });
  EXPECT_EQ(reported.load(), pool.size());
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, NestedLoopsRunInline) {
  std::atomic<int64_t> sum{0};
  parallel_for(4, 4, [&](int64_t i) { parallel_for(10, 4, [&](int64_t j) { sum += i * 10 + j; }); });
  EXPECT_EQ(sum.load(), (39 * 40) / 2);
}

TEST(ThreadPool, ConcurrentCallersBothComplete) {
  std::atomic<int64_t> a{0}, b{0};
  std::thread other([&] {
    for (int r = 0; r < 50; ++r) parallel_for(100, 4, [&](int64_t) { a++; });
  });
  for (int r = 0; r < 50; ++r) parallel_for(100, 4, [&](int64_t) { b++; });
  other.join();
  EXPECT_EQ(a.load(), 5000);
  EXPECT_EQ(b.load(), 5000);
}

TEST(ThreadPool, ExceptionsReachTheCaller) {
  EXPECT_THROW(parallel_for(100, 4, [](int64_t i) {
                 if (i == 57) throw std::runtime_error("57");
               }),
               std::runtime_error);
  // The pool is usable afterwards.
  std::atomic<int> n{0};
  parallel_for(10, 4, [&](int64_t) { n++; });
  EXPECT_EQ(n.load(), 10);
}

TEST(ThreadPool, TinyLoopsCostMicrosecondsNotThreadStarts) {
  // Many tiny loops back to back, as a network's small layers: the median must stay far below a thread start
  // on a loaded machine (milliseconds); 1 ms leaves room for a busy CI host.
  std::vector<double> us;
  std::atomic<int> sink{0};
  for (int r = 0; r < 200; ++r) {
    const auto start = std::chrono::steady_clock::now();
    parallel_for(2, 2, [&](int64_t i) { sink += static_cast<int>(i); });
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(us.begin(), us.end());
  EXPECT_LT(us[us.size() / 2], 1000.0);
}

TEST(ThreadPool, LateWorkersParticipantsRunExactlyOnce) {
  // Participants a worker has not started when the caller's own call returns run on the caller: the workers here
  // are asleep (past their spin) at each job's start, so many of their participants are taken by the caller and
  // the rest by the workers. Each must run once, whichever thread takes it, and the job must see all of them.
  ThreadPool pool(3);
  for (int r = 0; r < 200; ++r) {
    if (r % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
    std::vector<std::atomic<int>> seen(pool.size());
    pool.run(pool.size(), [&](unsigned t, unsigned n) {
      ASSERT_EQ(n, pool.size());
      seen[t]++;
      if (t != 0 && r % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(20));
    });
    for (unsigned t = 0; t < pool.size(); ++t) ASSERT_EQ(seen[t].load(), 1) << "round " << r << " participant " << t;
  }
}

TEST(ThreadPool, LateParticipantsExceptionReachesTheCaller) {
  ThreadPool pool(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the worker asleep: the caller likely runs t = 1
  EXPECT_THROW(pool.run(2, [](unsigned t, unsigned) {
                 if (t == 1) throw std::runtime_error("1");
               }),
               std::runtime_error);
  std::atomic<int> n{0};
  pool.run(2, [&](unsigned, unsigned) { n++; });
  EXPECT_EQ(n.load(), 2);
}
