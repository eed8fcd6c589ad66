// The tokens' gate on the gRPC port: an AuthMetadataProcessor on the server's credentials checks
// a call's bearer token on its initial metadata, before gRPC reads the call's body, and refuses
// UNAUTHENTICATED for every service but grpc.health.v1 (reflection included), so a caller
// without a token cannot make the server receive or parse a message. Each refusal counts in
// attn_refusals_total{reason="unauthenticated"} and attn_requests_total{code="UNAUTHENTICATED"}
// and gets a rate-limited log line. Handlers then find the participant with
// TokenRegistry::Authenticate as before (a token rotated in between is refused there).
#pragma once

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/support/string_ref.h>

#include <map>
#include <memory>

#include "server/auth.h"
#include "server/log.h"
#include "server/metrics.h"

namespace attn::server {

// The participant whose token a call's `authorization` header (in its initial metadata) carries,
// or UNAUTHENTICATED saying what is missing (TokenRegistry::Authenticate).
absl::StatusOr<std::shared_ptr<const Participant>> AuthenticateCall(
    const TokenRegistry& tokens, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata);

class TokenGate final : public grpc::AuthMetadataProcessor {
 public:
  // `tokens` and `metrics` must outlive the server.
  TokenGate(const TokenRegistry& tokens, Metrics& metrics) : tokens_(tokens), metrics_(metrics) {}

  // Hashing a token and comparing it with every participant's takes microseconds: inline.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed, OutputMetadata* response) override;

 private:
  const TokenRegistry& tokens_;
  Metrics& metrics_;
  LogRateLimit log_{20, 40};
};

}  // namespace attn::server
