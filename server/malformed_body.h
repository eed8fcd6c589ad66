// A call whose body is not a protobuf of its method's request type, answered by the server:
// INVALID_ARGUMENT naming the type, where gRPC's callback handlers answer UNIMPLEMENTED with no
// message and never call ours. An interceptor on each unary and server-streaming call of a served
// method (served_methods.h) sees gRPC's parse fail and rewrites the status before it is sent;
// each such refusal counts in attn_requests_total{rpc,code="INVALID_ARGUMENT"} and
// attn_refusals_total{reason="malformed_body"} and, with tokens, in
// attn_participant_requests_total of the participant whose token the call carries (the gate,
// token_gate.h, let no other through), and gets a rate-limited log line naming that participant.
//
// gRPC parses the body before any interceptor sees it and keeps no count of its bytes, so the
// message cannot say how many arrived.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <string>

#include "google/protobuf/descriptor.h"
#include "server/auth.h"
#include "server/log.h"
#include "server/metrics.h"

namespace attn::server {

class MalformedBodies final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` and `tokens` (null without a tokens file) must outlive the server.
  MalformedBodies(Metrics& metrics, const TokenRegistry* tokens)
      : metrics_(metrics), tokens_(tokens) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // A call of `method` whose body did not parse: counted, logged (rate-limited), and the status
  // its client gets. `context`: the call's, for its peer and its token's participant.
  grpc::Status Refuse(const google::protobuf::MethodDescriptor& method,
                      const grpc::ServerContextBase& context);

 private:
  Metrics& metrics_;
  const TokenRegistry* const tokens_;
  LogRateLimit log_{20, 40};
};

}  // namespace attn::server
