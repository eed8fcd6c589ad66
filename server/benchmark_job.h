// A RunBenchmark call: validated, planned (the engine's CasePlan of every case) and admitted as
// a whole before anything queues; then one task per case on its device, re-queued after each
// case so other participants' requests interleave, and events written one at a time in order.
// A reader that falls behind pauses the job (at most kMaxUnreadEvents wait to be written), and
// the job's deadline ends a paused job too.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attention/v1/attention.grpc.pb.h"
#include "attn/bench.h"
#include "server/call.h"
#include "server/scheduler.h"

namespace attn::server {

// Events a job keeps for a client that has not read them yet; past this the job's next case
// waits until the client reads.
inline constexpr int kMaxUnreadEvents = 16;

class BenchmarkJob : public grpc::ServerWriteReactor<attention::v1::RunBenchmarkEvent> {
 public:
  // Starts the call of `request` (which must live until Start returns): on any error the call
  // ends with it, before anything queued. `calls` and `devices` must outlive the call.
  static BenchmarkJob* Start(Calls& calls, const std::vector<DeviceWorkers*>& devices,
                             grpc::CallbackServerContext* context,
                             const attention::v1::RunBenchmarkRequest& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override { Calls::OnCancelled(*call_); }
  void OnDone() override;

 private:
  BenchmarkJob(Calls& calls, grpc::CallbackServerContext* context, std::shared_ptr<Call> call)
      : calls_(calls), context_(context), call_(std::move(call)) {}

  void Begin(const std::vector<DeviceWorkers*>& devices,
             const attention::v1::RunBenchmarkRequest& request);
  // Every case's plan and its cost at the device's rates: each call against max_call_seconds,
  // the whole against max_job_seconds (and the participant's max_job_seconds); then the host
  // memory the job holds for its life: the request as held, the cases, the largest numerics
  // check, and the unread events' bound.
  absl::Status AdmitCost(int64_t request_bytes);
  absl::Status Queue(size_t index, bool continuation);
  void RunCase(DeviceContext& context, Clock::time_point queued, size_t index);
  // After case `index`: the next case, the summary, or a pause while the reader is behind.
  void Next(size_t index);
  attention::v1::RunBenchmarkEvent ResultEvent(const BenchResult& r, int index, int total) const;
  // The job's end status for a stop after `done` of `total` cases.
  static absl::Status Stopped(const absl::Status& why, size_t done, int total);
  void Send(attention::v1::RunBenchmarkEvent event);
  // Ends the call with `status` once the queued events are written.
  void End(const absl::Status& status);
  void FinishIfEnded(std::unique_lock<std::mutex>& lock);
  // At the job's deadline while paused: the reader never caught up; the call is cancelled so
  // its pending write completes and the job ends.
  void PausedPastDeadline();

  Calls& calls_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<Call> call_;
  std::shared_ptr<BenchmarkJob> self_;  // until OnDone: the tasks' references keep it alive
  DeviceWorkers* device_ = nullptr;
  BenchOptions options_;
  std::vector<BenchCase> cases_;                 // those this call runs, in order
  std::vector<absl::StatusOr<CasePlan>> plans_;  // per case (an error: its result's status)
  std::vector<int> job_indices_;                 // cases_[i] is the job's case job_indices_[i]
  int job_total_ = 0;                            // cases in the whole job
  int ok_ = 0, unsupported_ = 0, failed_ = 0;    // touched by one case task at a time

  std::mutex mu_;
  std::deque<attention::v1::RunBenchmarkEvent> pending_;  // front() is written while writing_
  bool writing_ = false;
  bool end_requested_ = false;
  bool finished_ = false;
  bool done_ = false;     // OnDone ran: context_ is gone
  size_t paused_at_ = 0;  // > 0: case paused_at_ waits for the reader (cases are 1-based here)
  absl::Status final_;
};

}  // namespace attn::server
