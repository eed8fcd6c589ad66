#include "server/token_gate.h"

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "server/served_methods.h"
#include "server/text.h"

namespace attn::server {

absl::StatusOr<std::shared_ptr<const Participant>> AuthenticateCall(
    const TokenRegistry& tokens,
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  const auto header = metadata.find("authorization");
  return tokens.Authenticate(header == metadata.end()
                                 ? absl::string_view()
                                 : absl::string_view(header->second.data(), header->second.size()));
}

grpc::Status TokenGate::Process(const InputMetadata& metadata, grpc::AuthContext*, OutputMetadata*,
                                OutputMetadata*) {
  const auto view = [](const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); };
  // Health answers everyone: Kubernetes' probes carry no token.
  const auto path = metadata.find(":path");
  if (path != metadata.end() && absl::StartsWith(view(path->second), "/grpc.health.v1.Health/")) {
    return grpc::Status::OK;
  }
  auto participant = AuthenticateCall(tokens_, metadata);
  if (participant.ok()) return grpc::Status::OK;
  metrics_.Request(RpcLabel(path == metadata.end() ? "" : view(path->second)), "UNAUTHENTICATED",
                   0);
  metrics_.Refusal("unauthenticated");
  int64_t suppressed = 0;
  if (log_.Allow(&suppressed)) {
    LogFields fields = {{"rpc", path == metadata.end() ? "" : Quoted(view(path->second))},
                        {"code", "UNAUTHENTICATED"},
                        {"error", std::string(participant.status().message())}};
    if (suppressed > 0) fields.emplace_back("refusals_not_logged", std::to_string(suppressed));
    Log(spdlog::level::warn, "refused before the body", fields);
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(participant.status().message()));
}

}  // namespace attn::server
