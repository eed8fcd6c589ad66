// Status codes between abseil (the engine and server), gRPC (the wire) and their names: the one
// mapping the server and the clients share.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace attn {

// absl and gRPC codes, written out pair by pair (both follow google.rpc.Code, but nothing here
// relies on equal numbering). Codes outside the list map to UNKNOWN.
grpc::StatusCode ToGrpcCode(absl::StatusCode code);
absl::StatusCode FromGrpcCode(grpc::StatusCode code);

// An absl status as the gRPC status a call ends with: the code mapped, the message kept.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "FAILED_PRECONDITION", ...: abseil's canonical names (absl::StatusCodeToString).
std::string CodeName(absl::StatusCode code);
std::string CodeName(grpc::StatusCode code);

// CaseResult.status carries a google.rpc.Code number (= grpc::StatusCode's value).
int CodeNumber(absl::StatusCode code);
absl::StatusCode CodeFromNumber(int number);

}  // namespace attn
