// A fixed set of worker threads that split index ranges among themselves.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace attn {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Calls fn(i) for every i in [0, n), spread over the calling thread and at most
  // `max_threads` - 1 workers (0: all); returns when all calls finished. Safe to call from
  // several threads at once (calls share the workers).
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn, int max_threads = 0);

 private:
  struct Job;
  void WorkerLoop();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job*> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// Threads the host backends (cpu, reference) run on: SetHostThreads' count (attn/overrides.h)
// where set, else one per hardware thread.
int HostThreads();

// Threads one host call may use: `max_threads` (RunOptions::host_threads) where positive and
// fewer than HostThreads(), else HostThreads().
int HostCallThreads(int max_threads);

// The pool of HostThreads() threads (the caller's included) that the host backends share, made
// on first use and kept for the process.
ThreadPool& HostPool();

}  // namespace attn
