#include "server/scheduler.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "server/log.h"

namespace attn::server {

DeviceWorkers::DeviceWorkers(int index, std::vector<std::unique_ptr<DeviceContext>> contexts,
                             int depth, Throughputs throughputs)
    : index_(index),
      depth_(depth),
      contexts_(std::move(contexts)),
      throughputs_(std::move(throughputs)) {
  for (auto& context : contexts_) {
    threads_.emplace_back([this, c = context.get()] { WorkerLoop(*c); });
  }
}

DeviceWorkers::~DeviceWorkers() { Stop(); }

absl::Status DeviceWorkers::Submit(Task task, bool continuation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || (closed_ && !continuation)) {
    return absl::UnavailableError("server is shutting down; retry on another replica");
  }
  if (!continuation && waiting_ >= depth_) {
    return absl::UnavailableError(
        absl::StrFormat("queue full: %d of %d requests waiting on device %d (%s); retry later",
                        waiting_, depth_, index_, info().name));
  }
  auto& queue = per_client_[task.client];
  if (!continuation && static_cast<int>(queue.size()) >= task.max_queued) {
    const std::string who = task.client;
    if (queue.empty()) per_client_.erase(who);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s already has %d tasks waiting on device %d; the limit (--participant_max_queued, or "
        "max_queued in the tokens file) is %d: wait for them to finish",
        who, queue.size(), index_, task.max_queued));
  }
  task.queued = Clock::now();
  if (queue.empty()) turn_.push_back(task.client);
  queue.push_back(std::move(task));
  ++waiting_;
  cv_.notify_one();
  return absl::OkStatus();
}

void DeviceWorkers::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
}

void DeviceWorkers::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = stopping_ = true;
    cv_.notify_all();
  }
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int DeviceWorkers::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

int64_t DeviceWorkers::arena_in_use() const {
  int64_t sum = 0;
  for (const auto& c : contexts_) sum += c->arena().bytes_in_use();
  return sum;
}

void DeviceWorkers::WorkerLoop(DeviceContext& context) {
  // A new thread's current device is GPU 0; this worker's handles and launches belong to its own.
  if (absl::Status s = context.MakeCurrent(); !s.ok()) {
    Log(spdlog::level::err, "worker cannot select its GPU; its tasks will fail",
        {{"device", context.info().ToString()}, {"error", std::string(s.message())}});
  }
  // The first client in turn whose running tasks are under its limit; turn_.end() if none.
  const auto next = [&] {
    return std::find_if(turn_.begin(), turn_.end(), [&](const std::string& client) {
      const auto r = running_.find(client);
      return (r == running_.end() ? 0 : r->second) < per_client_.at(client).front().max_running;
    });
  };
  for (;;) {
    Task task;
    std::string client;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        return (waiting_ > 0 && next() != turn_.end()) || (stopping_ && waiting_ == 0);
      });
      if (waiting_ == 0) return;  // stopping and drained
      // That client gives one task and goes to the back of the line.
      const auto at = next();
      client = *at;
      turn_.erase(at);
      auto it = per_client_.find(client);
      task = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) {
        per_client_.erase(it);
      } else {
        turn_.push_back(client);
      }
      --waiting_;
      ++running_[client];
    }
    task.run(context, task.queued);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--running_[client] == 0) running_.erase(client);
    }
    cv_.notify_all();  // a worker may have been waiting for this client's running count
  }
}

}  // namespace attn::server
