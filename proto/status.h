// Status codes between abseil (the engine and server), gRPC (the wire) and their names: the one
// mapping the server and the clients share.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace attn {

// absl and gRPC codes, written out pair by pair (both follow google.rpc.Code, but nothing here
// relies on equal numbering). Codes outside the list map to UNKNOWN.
grpc::StatusCode ToGrpcCode(absl::StatusCode code);
absl::StatusCode FromGrpcCode(grpc::StatusCode code);

// An absl status as the gRPC status a call ends with: the code mapped, the message kept
// (BoundedMessage: it travels in a header).
grpc::Status ToGrpcStatus(const absl::Status& status);

// A message that may quote what a client sent, cut to its first 1 KiB with the full size after:
// what replies, logs and results carry.
std::string BoundedMessage(absl::string_view message);

// "OK", "FAILED_PRECONDITION", ...: abseil's canonical names (absl::StatusCodeToString).
std::string CodeName(absl::StatusCode code);
std::string CodeName(grpc::StatusCode code);

// CaseResult.status carries a google.rpc.Code number (= grpc::StatusCode's value).
int CodeNumber(absl::StatusCode code);
absl::StatusCode CodeFromNumber(int number);

}  // namespace attn
