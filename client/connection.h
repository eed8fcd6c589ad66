// Where attn-client sends its calls: --target as host:port, a comma list of host:port, or
// dns:///name:port. Every form gets one gRPC channel with the round_robin policy, so calls
// spread over the replicas behind it (for a headless Kubernetes Service, the pods behind the
// name); bench runs as many cases at once as there are replicas.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace attn::client {

struct Target {
  std::string
      uri;  // what the channel dials: "host:port", "ipv4:10.0.0.1:1,10.0.0.2:2", "dns:///..."
  int replicas = 1;  // addresses behind it (resolved here for comma lists and dns:///)
  // TLS (--tls, --tls_ca_file): verify the server's certificate against tls_ca_pem, or the
  // system's roots when empty.
  bool tls = false;
  std::string tls_ca_pem;
  // --token / $ATTN_TOKEN: sent as "authorization: Bearer TOKEN" with every call.
  std::string token;
};

// InvalidArgument naming --target for an empty item, a missing port, or a name that does not
// resolve. A comma list's hosts are resolved here (the channel needs numeric addresses for a
// static list); one host:port is left to gRPC's resolver.
absl::StatusOr<Target> ParseTarget(const std::string& spec);

// A channel to `target` speaking its TLS and sending its token; `connection` > 0 gives a channel
// a connection of its own (attn-load's clients), 0 lets gRPC share one.
std::shared_ptr<grpc::Channel> MakeChannel(const Target& target, int connection = 0);

// The security of --tls, --tls_ca_file (default $ATTN_TLS_CA_FILE) and --token (default
// $ATTN_TOKEN) into `target`, `spec` being --target as given. InvalidArgument naming the flag for
// a CA file that is not a readable PEM certificate; for a token with a character no header may
// carry (whitespace, a trailing newline included, control characters, anything outside ASCII),
// naming the character and where it is; and for a token that would go in plaintext to a target
// that is not loopback, unless `insecure_token` (--insecure_token) says so.
absl::Status SetSecurity(bool tls, const std::string& ca_file, const std::string& token,
                         bool insecure_token, const std::string& spec, Target& target);

// Why `token` (from `source`, "--token" or "$ATTN_TOKEN") cannot be sent: "" when it can. A token
// is visible ASCII only (0x21-0x7E), as attn_client checks it (client/python identity.py).
std::string TokenProblem(const std::string& token, const std::string& source);

// Whether every host of --target `spec` is this machine by name or address: localhost,
// 127.0.0.0/8, ::1 (other names count as remote, whatever they resolve to).
bool IsLoopbackTarget(const std::string& spec);

// A gRPC error as one line: "INVALID_ARGUMENT: shape.head_dim: must be ... (from
// 10.0.0.1:50051, request 42)", with what to fix for a transport or identity failure (TLS on
// one side only, an untrusted certificate, no token). `request_id` is the server's id of the
// call (its log line), from the reply's trailing metadata; `tls` whether the client used TLS.
std::string DescribeRpcError(const grpc::Status& status, const std::string& peer,
                             const std::string& request_id = "", bool tls = false);
// The same for a finished call's context.
std::string DescribeRpcError(const grpc::Status& status, const grpc::ClientContext& context,
                             bool tls);

}  // namespace attn::client
