#include "cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>

#include "attn/overrides.h"

namespace attn {

// One ParallelFor call: indices are claimed from `next` by every thread that joins it.
struct ThreadPool::Job {
  const std::function<void(int64_t)>* fn;
  int64_t n;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  int active = 0;  // workers inside Drain; guarded by mu. The owner waits for 0 before returning.
  int max_helpers = 0;  // workers that may join at once
  std::mutex mu;
  std::condition_variable finished;

  // Runs indices until none are left.
  void Drain() {
    int64_t ran = 0;
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      (*fn)(i);
      ++ran;
    }
    done.fetch_add(ran);
  }
};

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(1, threads); ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::ParallelFor(int64_t n, const std::function<void(int64_t)>& fn, int max_threads) {
  if (n <= 0) return;
  Job job;
  job.fn = &fn;
  job.n = n;
  job.max_helpers = max_threads <= 0 ? static_cast<int>(workers_.size()) : max_threads - 1;
  if (n > 1 && !workers_.empty() && job.max_helpers > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(&job);
  }
  wake_.notify_all();
  job.Drain();
  {
    // Once off the queue no further worker can join; those already in are counted in `active`.
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), &job), jobs_.end());
  }
  std::unique_lock<std::mutex> lock(job.mu);
  job.finished.wait(lock, [&] { return job.done.load() == n && job.active == 0; });
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    Job* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // A job with indices left and room for another helper.
      const auto open = [](Job* j) {
        std::lock_guard<std::mutex> job_lock(j->mu);
        return j->next.load() < j->n && j->active < j->max_helpers;
      };
      wake_.wait(lock, [&] { return stopping_ || std::any_of(jobs_.begin(), jobs_.end(), open); });
      if (stopping_) return;
      for (Job* j : jobs_) {
        std::lock_guard<std::mutex> job_lock(j->mu);
        if (j->next.load() < j->n && j->active < j->max_helpers) {
          job = j;
          ++j->active;
          break;
        }
      }
    }
    // Indices are claimed outside mu_, so the job seen by the wait may be drained by now.
    if (job == nullptr) continue;
    job->Drain();
    // The owner may destroy the job as soon as it sees active == 0: touch nothing after this.
    std::lock_guard<std::mutex> job_lock(job->mu);
    --job->active;
    job->finished.notify_all();
  }
}

namespace {

// SetHostThreads' count (0: one per hardware thread), written under PoolMutex() only while the
// pool does not exist, and whether HostPool has made it (after which the count is fixed).
std::mutex& PoolMutex() {
  static std::mutex mu;
  return mu;
}
std::atomic<int> forced_threads{0};
bool pool_made = false;

}  // namespace

bool SetHostThreads(std::optional<int> threads) {
  std::lock_guard<std::mutex> lock(PoolMutex());
  if (pool_made) return false;
  forced_threads.store(threads.value_or(0) > 0 ? *threads : 0, std::memory_order_relaxed);
  return true;
}

int HostThreads() {
  if (const int n = forced_threads.load(std::memory_order_relaxed); n > 0) return n;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int HostCallThreads(int max_threads) {
  return max_threads > 0 ? std::min(max_threads, HostThreads()) : HostThreads();
}

ThreadPool& HostPool() {
  static ThreadPool* pool = [] {
    std::lock_guard<std::mutex> lock(PoolMutex());
    pool_made = true;
    return new ThreadPool(HostThreads());
  }();
  return *pool;
}

}  // namespace attn
