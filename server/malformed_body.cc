#include "server/malformed_body.h"

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "server/served_methods.h"
#include "server/token_gate.h"

namespace attn::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

// One call's interceptor. gRPC parses a unary or server-streaming call's request before the
// handler would run; POST_RECV_MESSAGE then carries the parsed message, or null when it did not
// parse, and gRPC finishes the call itself (PRE_SEND_STATUS) without calling the handler.
class MalformedBodyInterceptor final : public grpc::experimental::Interceptor {
 public:
  MalformedBodyInterceptor(MalformedBodies& refusals,
                           const google::protobuf::MethodDescriptor& method,
                           grpc::ServerContextBase* context)
      : refusals_(refusals), method_(method), context_(context) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* batch) override {
    if (batch->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        batch->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ && batch->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      batch->ModifySendStatus(refusals_.Refuse(method_, *context_));
    }
    batch->Proceed();
  }

 private:
  MalformedBodies& refusals_;
  const google::protobuf::MethodDescriptor& method_;
  grpc::ServerContextBase* const context_;
  bool malformed_ = false;
};

}  // namespace

grpc::experimental::Interceptor* MalformedBodies::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const google::protobuf::MethodDescriptor* method = FindServedMethod(info->method());
  // A client-streaming call's handler reads its messages itself and sees a failed read.
  if (method == nullptr || method->client_streaming()) return nullptr;
  return new MalformedBodyInterceptor(*this, *method, info->server_context());
}

grpc::Status MalformedBodies::Refuse(const google::protobuf::MethodDescriptor& method,
                                     const grpc::ServerContextBase& context) {
  // With tokens the gate let the call in, so its token names a participant, unless the file
  // changed since (then the refusal is the call's alone, as a handler would find).
  std::string participant;
  if (tokens_ != nullptr) {
    auto found = AuthenticateCall(*tokens_, context.client_metadata());
    if (found.ok()) participant = (*found)->name;
  }
  const std::string& type = method.input_type()->full_name();
  const std::string message =
      absl::StrCat("request body is not a valid ", type, ": send a serialized ", type,
                   ", as clients generated from attn's proto/ do");
  metrics_.Request(method.name(), "INVALID_ARGUMENT", 0);
  metrics_.Refusal("malformed_body");
  if (!participant.empty())
    metrics_.ParticipantRequest(participant, method.name(), "INVALID_ARGUMENT");
  int64_t suppressed = 0;
  if (log_.Allow(&suppressed)) {
    LogFields fields = {{"peer", context.peer()},
                        {"rpc", method.name()},
                        {"code", "INVALID_ARGUMENT"},
                        {"error", message}};
    if (!participant.empty()) fields.emplace_back("participant", participant);
    if (suppressed > 0) fields.emplace_back("refusals_not_logged", absl::StrCat(suppressed));
    Log(spdlog::level::info, "request", fields);
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

}  // namespace attn::server
