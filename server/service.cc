#include "server/service.h"

#include "proto/status.h"
#include "server/benchmark_job.h"

namespace attn::server {
namespace v1 = attention::v1;

AttentionService::AttentionService(ServiceConfig config, std::vector<DeviceWorkers*> devices,
                                   Metrics& metrics)
    : config_(std::move(config)),
      devices_(std::move(devices)),
      calls_(config_, metrics),
      attends_(calls_, devices_) {}

grpc::ServerUnaryReactor* AttentionService::Attend(grpc::CallbackServerContext* context,
                                                   const v1::AttendRequest* request,
                                                   v1::AttendResponse* response) {
  auto call = calls_.Begin("Attend", context);
  call->small_request = request->ByteSizeLong() <= Call::kSmallRequestBytes;
  auto* reactor = new AttendReactor(call);
  attends_.Start(context, call, *request, absl::OkStatus(),
                 static_cast<int64_t>(request->SpaceUsedLong()), /*output_copies=*/1, response,
                 [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerWriteReactor<v1::RunBenchmarkEvent>* AttentionService::RunBenchmark(
    grpc::CallbackServerContext* context, const v1::RunBenchmarkRequest* request) {
  return BenchmarkJob::Start(calls_, devices_, context, *request);
}

}  // namespace attn::server
