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

int DeviceWorkers::ActiveClients() const {
  int n = static_cast<int>(per_client_.size());
  for (const auto& [client, count] : running_) n += per_client_.count(client) == 0 ? 1 : 0;
  return n;
}

absl::Status DeviceWorkers::Submit(Task task, bool continuation, const char** reason) {
  const auto refuse = [reason](const char* why, absl::Status status) {
    if (reason != nullptr) *reason = why;
    return status;
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || (closed_ && !continuation)) {
    return refuse("queue_full",
                  absl::UnavailableError("server is shutting down; retry on another replica"));
  }
  const auto it = per_client_.find(task.client);
  const int mine = it == per_client_.end() ? 0 : static_cast<int>(it->second.size());
  if (!continuation) {
    if (mine >= task.max_queued) {
      return refuse("participant_queued",
                    absl::ResourceExhaustedError(absl::StrFormat(
                        "%s already has %d tasks waiting on device %d; the limit "
                        "(--participant_max_queued, or max_queued in the tokens file) is %d: "
                        "wait for them to finish",
                        task.client, mine, index_, task.max_queued)));
    }
    const bool known = it != per_client_.end() || running_.count(task.client) > 0;
    const int active = ActiveClients() + (known ? 0 : 1);
    const int share = std::max(1, depth_ / (active + 1));
    if (active > 1 && mine >= share) {
      return refuse(
          "participant_queue_share",
          absl::ResourceExhaustedError(absl::StrFormat(
              "%s already has %d tasks waiting on device %d, its share of the queue "
              "while %d other%s use it (--queue_depth %d / %d, a place kept for the "
              "next); wait for them to finish",
              task.client, mine, index_, active - 1, active == 2 ? "" : "s", depth_, active + 1)));
    }
    if (waiting_ >= depth_ && mine > 0) {
      return refuse("queue_full", absl::UnavailableError(absl::StrFormat(
                                      "queue full: %d of %d requests waiting on device %d (%s); "
                                      "retry later",
                                      waiting_, depth_, index_, info().name)));
    }
  }
  task.queued = Clock::now();
  auto& queue = per_client_[task.client];
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

absl::StatusOr<DeviceWorkers*> PickDevice(const std::vector<DeviceWorkers*>& devices, int index) {
  if (index >= 0) {
    for (DeviceWorkers* d : devices) {
      if (d->index() == index) return d;
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("device: this server has devices 0..%d, got %d",
                        static_cast<int>(devices.size()) - 1, index));
  }
  if (index < -1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device: must be a device index or -1 (least busy), got %d", index));
  }
  return *std::min_element(devices.begin(), devices.end(),
                           [](auto* a, auto* b) { return a->waiting() < b->waiting(); });
}

}  // namespace attn::server
