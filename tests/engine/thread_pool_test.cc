#include "cpu/thread_pool.h"

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "attn/overrides.h"
#include "gtest/gtest.h"

namespace attn {
namespace {

TEST(ThreadPool, RunsEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(10007);
  pool.ParallelFor(static_cast<int64_t>(hits.size()), [&](int64_t i) { hits[i]++; });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, ServesConcurrentCallers) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) pool.ParallelFor(100, [&](int64_t i) { total += i; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 6 * 50 * 4950);
}

TEST(ThreadPool, EmptyRangeReturnsAtOnce) {
  ThreadPool pool(2);
  bool called = false;
  pool.ParallelFor(0, [&](int64_t) { called = true; });
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

// Many short jobs on many workers: workers wake for a job that others drain first (the case
// that once dereferenced a null job).
TEST(ThreadPool, SurvivesManyShortJobsOnManyWorkers) {
  ThreadPool pool(16);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 3000; ++r) pool.ParallelFor(3, [&](int64_t i) { total += i + 1; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 3000 * 6);
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

// The host threads are fixed once the shared pool exists: a later SetHostThreads changes nothing
// and says so (attn-bench calls it before any host backend runs).
TEST(HostThreads, AreFixedOnceThePoolExists) {
  const int threads = HostThreads();
  std::atomic<int64_t> ran{0};
  HostPool().ParallelFor(8, [&](int64_t) { ++ran; });
  EXPECT_EQ(ran.load(), 8);
  EXPECT_FALSE(SetHostThreads(threads + 3));
  EXPECT_EQ(HostThreads(), threads);
  EXPECT_FALSE(SetHostThreads(std::nullopt));
  EXPECT_EQ(HostThreads(), threads);
}

}  // namespace
}  // namespace attn
