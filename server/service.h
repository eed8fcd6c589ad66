// attention.v1.AttentionService on the gRPC callback API: the RPCs' entry points. A request's
// life (identity, quotas, its log line and metrics) is call.h's; Attend's path is attend.h's, a
// benchmark job's benchmark_job.h's, GetServerInfo's info.cc's.
#pragma once

#include <vector>

#include "attention/v1/attention.grpc.pb.h"
#include "server/attend.h"
#include "server/call.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace attn::server {

class AttentionService final : public attention::v1::AttentionService::CallbackService {
 public:
  AttentionService(ServiceConfig config, std::vector<DeviceWorkers*> devices, Metrics& metrics);

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const attention::v1::GetServerInfoRequest* request,
                                          attention::v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* Attend(grpc::CallbackServerContext* context,
                                   const attention::v1::AttendRequest* request,
                                   attention::v1::AttendResponse* response) override;
  grpc::ServerWriteReactor<attention::v1::RunBenchmarkEvent>* RunBenchmark(
      grpc::CallbackServerContext* context,
      const attention::v1::RunBenchmarkRequest* request) override;

  // From now on new RPCs get UNAVAILABLE; accepted ones run to the end.
  void StartDraining() { calls_.StartDraining(); }
  // Waits until no request is in flight or `timeout_s` passes; returns how many remain.
  int WaitIdle(double timeout_s) { return calls_.WaitIdle(timeout_s); }
  // Stops every request in flight with `why`: queued ones are answered with it when a worker
  // takes them (at once), running ones at their next piece, benchmark jobs at their current case.
  void StopAll(const absl::Status& why) { calls_.StopAll(why); }

  // What the other protocols' facades (kserve_service.h) share.
  Calls& calls() { return calls_; }
  Attends& attends() { return attends_; }
  const std::vector<DeviceWorkers*>& devices() const { return devices_; }
  const ServiceConfig& config() const { return config_; }

 private:
  const ServiceConfig config_;
  const std::vector<DeviceWorkers*> devices_;
  Calls calls_;
  Attends attends_;
};

}  // namespace attn::server
