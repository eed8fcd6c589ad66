// An attention call on the path every protocol shares (attention.v1's Attend, and the Open
// Inference Protocol's ModelInfer): identity, draining, the participant's quotas, validation,
// the engine's plan of the call and its admission (device time, device memory, the host memory
// the request and its reply hold), the fair queue, the run in pieces on a worker, the reply.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "attention/v1/attention.pb.h"
#include "server/call.h"
#include "server/scheduler.h"

namespace attn::server {

class Attends {
 public:
  // `calls` and `devices` must outlive this.
  Attends(Calls& calls, std::vector<DeviceWorkers*> devices)
      : calls_(calls), devices_(std::move(devices)) {}

  // Runs `request` for `call`. `converted` is a facade's own verdict on the request it converted
  // into `request` (INVALID_ARGUMENT naming its field, NOT_FOUND for its model), reported where
  // ValidateAttend's would be. `held_bytes`: the host memory the request's messages hold as
  // parsed (Message::SpaceUsedLong of each), and `output_copies`: how many host copies of the
  // output the reply makes; both are charged to the host budget for the call's life. `reply`
  // runs once with the status the client gets, after the request's log line and metrics and the
  // quota refusals' delay; `request` and `response` must live until then.
  void Start(grpc::CallbackServerContext* context, std::shared_ptr<Call> call,
             const attention::v1::AttendRequest& request, const absl::Status& converted,
             int64_t held_bytes, int output_copies, attention::v1::AttendResponse* response,
             std::function<void(const absl::Status&)> reply);

 private:
  Calls& calls_;
  const std::vector<DeviceWorkers*> devices_;
};

// An Attend's reactor: finishes once; a cancel (the client's, or its deadline) stops the work.
class AttendReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit AttendReactor(std::shared_ptr<Call> call) : call_(std::move(call)) {}
  void OnCancel() override { Calls::OnCancelled(*call_); }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<Call> call_;
};

}  // namespace attn::server
