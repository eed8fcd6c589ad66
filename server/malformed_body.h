// A call whose body is not a protobuf of its method's request type, answered by the server:
// INVALID_ARGUMENT naming the type, where gRPC's callback handlers answer UNIMPLEMENTED with no
// message and never call ours. An interceptor on each unary and server-streaming call of a served
// method (served_methods.h) sees gRPC's parse fail and rewrites the status before it is sent;
// each such refusal counts in attn_requests_total{rpc,code="INVALID_ARGUMENT"} and
// attn_refusals_total{reason="malformed_body"} and gets a rate-limited log line.
//
// gRPC parses the body before any interceptor sees it and keeps no count of its bytes, so the
// message cannot say how many arrived.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <string>

#include "google/protobuf/descriptor.h"
#include "server/log.h"
#include "server/metrics.h"

namespace attn::server {

class MalformedBodies final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server.
  explicit MalformedBodies(Metrics& metrics) : metrics_(metrics) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

  // A call of `method` from `peer` whose body did not parse: counted, logged (rate-limited), and
  // the status its client gets.
  grpc::Status Refuse(const google::protobuf::MethodDescriptor& method, const std::string& peer);

 private:
  Metrics& metrics_;
  LogRateLimit log_{20, 40};
};

}  // namespace attn::server
