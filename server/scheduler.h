// Per-device worker pools with bounded, participant-fair queues.
//
// Each device has `workers` threads, each owning one DeviceContext (its own stream, handles and
// arena), so calls on one context never overlap. Waiting tasks are kept per participant (the
// token's name, or the client key without tokens) and served round-robin across participants: a
// participant's 200-case sweep (one task per case, re-queued after each) cannot starve another
// participant's single Attend. A participant has at most `max_running` tasks on the workers at
// once and `max_queued` waiting, so with two workers or more one participant cannot hold them all.
// The queue is shared fairly too: while others use the device, a participant's waiting tasks are
// at most depth / (n + 1), n the participants with tasks here (itself included), and a
// participant with nothing waiting is never refused for a full queue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"
#include "server/throughput.h"

namespace attn::server {

using Clock = std::chrono::steady_clock;

// A span of Clock in seconds (timings, logs, metrics).
inline double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Task {
  std::string client;        // fairness key: the participant
  int max_queued = 1 << 30;  // the participant's limits (ParticipantLimits)
  int max_running = 1 << 30;
  // Runs on a worker with that worker's context; `queued` is when the task was submitted.
  std::function<void(DeviceContext& context, Clock::time_point queued)> run;
  Clock::time_point queued{};
};

class DeviceWorkers {
 public:
  // Starts one worker thread per context. `depth` bounds the tasks waiting (new requests only).
  // `throughputs` are the device's measured rates (admission's estimates).
  DeviceWorkers(int index, std::vector<std::unique_ptr<DeviceContext>> contexts, int depth,
                Throughputs throughputs = {});
  ~DeviceWorkers();  // Stop()s and joins
  DeviceWorkers(const DeviceWorkers&) = delete;
  DeviceWorkers& operator=(const DeviceWorkers&) = delete;

  // Queues `task`. A new request is refused with UNAVAILABLE when the pool is closed or `depth`
  // tasks already wait (unless its participant has none waiting), and with RESOURCE_EXHAUSTED
  // when its participant already has task.max_queued waiting here, or its share of the queue
  // while others use the device; a continuation (the next case of an accepted job) is always
  // taken and counts against its participant, so accepted work is never dropped. On refusal
  // `reason`, when given, is set to its attn_refusals_total label (queue_full,
  // participant_queued, participant_queue_share).
  absl::Status Submit(Task task, bool continuation = false, const char** reason = nullptr);

  // New requests are refused from now on (continuations still run).
  void Close();
  // Workers finish the waiting tasks and exit; returns when they have. Submit fails afterwards.
  void Stop();

  int index() const { return index_; }
  const DeviceInfo& info() const { return contexts_.front()->info(); }
  int workers() const { return static_cast<int>(contexts_.size()); }
  int depth_limit() const { return depth_; }
  int waiting() const;
  // Arena bytes of one worker's context (what one request may use) and in use over all workers.
  int64_t arena_capacity() const { return contexts_.front()->arena().capacity(); }
  int64_t arena_in_use() const;
  const Throughputs& throughputs() const { return throughputs_; }

 private:
  void WorkerLoop(DeviceContext& context);

  const int index_;
  const int depth_;
  std::vector<std::unique_ptr<DeviceContext>> contexts_;
  const Throughputs throughputs_;
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::deque<Task>> per_client_;
  std::deque<std::string> turn_;        // clients with waiting tasks, in serving order
  std::map<std::string, int> running_;  // tasks on the workers now, per client
  // Clients with tasks waiting or running here.
  int ActiveClients() const;
  int waiting_ = 0;
  bool closed_ = false;
  bool stopping_ = false;
};

// The device with the fewest waiting tasks, or the one named (index >= 0); InvalidArgument for
// an index this server does not have.
absl::StatusOr<DeviceWorkers*> PickDevice(const std::vector<DeviceWorkers*>& devices, int index);

}  // namespace attn::server
