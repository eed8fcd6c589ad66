#include "server/kserve_service.h"

#include "absl/strings/str_cat.h"
#include "attn/registry.h"
#include "proto/status.h"

namespace attn::server {
namespace {

// A ModelInfer's reactor: holds the Attend it became and that Attend's reply until the call is
// done; a cancel (the client's, or its deadline) stops the work, as for Attend.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit InferReactor(std::shared_ptr<Call> call) : call_(std::move(call)) {}
  void OnCancel() override { Calls::OnCancelled(*call_); }
  void OnDone() override { delete this; }

  attention::v1::AttendRequest attend;
  attention::v1::AttendResponse result;

 private:
  const std::shared_ptr<Call> call_;
};

}  // namespace

template <typename Answer>
grpc::ServerUnaryReactor* InferenceService::Control(const char* rpc,
                                                    grpc::CallbackServerContext* context,
                                                    Answer answer) {
  Calls& calls = attention_.calls();
  auto call = calls.Begin(rpc, context);
  auto* reactor = context->DefaultReactor();
  absl::Status status = calls.Identify(context, "", *call);
  if (status.ok()) status = answer();
  calls.Done(*call, status);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

bool InferenceService::Ready(const kserve::Model& model) const {
  if (!attention_.calls().Admit().ok()) return false;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    const auto reference = AttentionProblem::SelfAttention(4, 128, 8, 64, dtype);
    for (const DeviceWorkers* device : attention_.devices()) {
      for (const auto& v : BackendRegistry::Default().Verdicts(reference, device->info())) {
        if (v.support.ok() && (model.backend.empty() || model.backend == v.backend->name()))
          return true;
      }
    }
  }
  return false;
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(grpc::CallbackServerContext* context,
                                                       const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  return Control("ServerLive", context, [&] {
    response->set_live(true);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(grpc::CallbackServerContext* context,
                                                        const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  return Control("ServerReady", context, [&] {
    response->set_ready(attention_.calls().Admit().ok());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(grpc::CallbackServerContext* context,
                                                       const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  return Control("ModelReady", context, [&] {
    auto model = kserve::FindModel(request->name(), request->version());
    if (!model.ok()) return model.status();
    response->set_ready(Ready(*model));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(
    grpc::CallbackServerContext* context, const inference::ServerMetadataRequest*,
    inference::ServerMetadataResponse* response) {
  return Control("ServerMetadata", context, [&] {
    response->set_name("attn");
    response->set_version(attention_.config().version);
    response->add_extensions("model_configuration");
    response->add_extensions("parameters");
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(
    grpc::CallbackServerContext* context, const inference::ModelMetadataRequest* request,
    inference::ModelMetadataResponse* response) {
  return Control("ModelMetadata", context, [&] {
    auto model = kserve::FindModel(request->name(), request->version());
    if (!model.ok()) return model.status();
    *response = kserve::Metadata(*model);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(
    grpc::CallbackServerContext* context, const inference::ModelConfigRequest* request,
    inference::ModelConfigResponse* response) {
  return Control("ModelConfig", context, [&] {
    auto model = kserve::FindModel(request->name(), request->version());
    if (!model.ok()) return model.status();
    *response->mutable_config() = kserve::Config(*model);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(grpc::CallbackServerContext* context,
                                                       const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  auto call = attention_.calls().Begin("ModelInfer", context);
  call->small_request = request->ByteSizeLong() <= Call::kSmallRequestBytes;
  auto* reactor = new InferReactor(call);
  // The conversion's verdict waits for identity and quotas, where Attend's validation would.
  absl::Status converted;
  auto model = kserve::FindModel(request->model_name(), request->model_version());
  if (model.ok()) {
    auto attend = kserve::AttendFromInfer(*request, *model);
    if (attend.ok()) {
      reactor->attend = *std::move(attend);
    } else {
      converted = attend.status();
    }
  } else {
    converted = model.status();
  }
  // Held for the call: the request and the Attend converted from it (a copy of its tensors); the
  // reply copies the output twice (the Attend's reply, then the infer response's).
  const int64_t held =
      static_cast<int64_t>(request->SpaceUsedLong() + reactor->attend.SpaceUsedLong());
  attention_.attends().Start(context, call, reactor->attend, converted, held,
                             /*output_copies=*/2, &reactor->result,
                             [reactor, request, response](const absl::Status& status) {
                               if (status.ok()) {
                                 kserve::InferFromAttend(*request, reactor->attend, reactor->result,
                                                         response);
                               }
                               reactor->Finish(ToGrpcStatus(status));
                             });
  return reactor;
}

}  // namespace attn::server
