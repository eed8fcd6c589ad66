// inference.GRPCInferenceService, the Open Inference Protocol (KServe v2) facade, on the same port
// and credentials as attention.v1: Triton's clients and perf_analyzer drive attn unchanged.
// ModelInfer runs on Attends::Start, Attend's own path (identity, quotas,
// validation, admission, the fair queue, deadlines in pieces); every RPC gets one log line and
// metrics under its own rpc label ("ModelInfer", "ServerLive", ...). Models: server/kserve.h.
#pragma once

#include "inference/grpc_service.grpc.pb.h"
#include "server/kserve.h"
#include "server/service.h"

namespace attn::server {

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `attention` must outlive this.
  explicit InferenceService(AttentionService& attention) : attention_(attention) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context,
                                       const inference::ServerLiveRequest* request,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context,
                                        const inference::ServerReadyRequest* request,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context,
                                       const inference::ModelReadyRequest* request,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest* request,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;

 private:
  // A control RPC: identity (tokens as for every attention.v1 RPC), then `answer`, the log line
  // and metrics.
  template <typename Answer>
  grpc::ServerUnaryReactor* Control(const char* rpc, grpc::CallbackServerContext* context,
                                    Answer answer);
  // Whether `model` can run here now: the server takes work, and its backend (for "attention",
  // any) supports the codelab's default shape in some datatype on some device.
  bool Ready(const kserve::Model& model) const;

  AttentionService& attention_;
};

}  // namespace attn::server
