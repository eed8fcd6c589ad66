// Where attn-client sends its calls: --target as host:port, a comma list of host:port, or
// dns:///name:port. Every form gets one gRPC channel with the round_robin policy, so calls
// spread over the replicas behind it (for a headless Kubernetes Service, the pods behind the
// name); bench runs as many cases at once as there are replicas.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace attn::client {

struct Target {
  std::string uri;   // what the channel dials: "host:port", "ipv4:10.0.0.1:1,10.0.0.2:2", "dns:///..."
  int replicas = 1;  // addresses behind it (resolved here for comma lists and dns:///)
};

// InvalidArgument naming --target for an empty item, a missing port, or a name that does not
// resolve. A comma list's hosts are resolved here (the channel needs numeric addresses for a
// static list); one host:port is left to gRPC's resolver.
absl::StatusOr<Target> ParseTarget(const std::string& spec);

std::shared_ptr<grpc::Channel> MakeChannel(const Target& target);

// A gRPC error as one line: "INVALID_ARGUMENT: shape.head_dim: must be ... (from 10.0.0.1:50051)".
std::string DescribeRpcError(const grpc::Status& status, const std::string& peer);

}  // namespace attn::client
