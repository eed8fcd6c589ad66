// The RPCs attn-server's gRPC port serves, read from the generated descriptors of its services
// (attention.v1.AttentionService, inference.GRPCInferenceService and gRPC's reflection), so a new
// RPC is known wherever a call's path is turned into a metrics label or a request type.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace attn::server {

// The method at `path` ("/attention.v1.AttentionService/Attend"); null for a path this server
// does not serve (gRPC's health service included: it has no descriptor here).
const google::protobuf::MethodDescriptor* FindServedMethod(absl::string_view path);

// attn_requests_total's rpc label of `path`: its method's name ("Attend"), or "unknown" for a
// path this server does not serve, so labels stay bounded whatever paths callers send.
std::string RpcLabel(absl::string_view path);

}  // namespace attn::server
