// The one place engine statuses become gRPC statuses.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace attn::server {

// absl and gRPC share code numbers and meanings (INVALID_ARGUMENT: bad request, naming the field;
// FAILED_PRECONDITION: this backend or device cannot; RESOURCE_EXHAUSTED: memory or size;
// UNAVAILABLE: queue full or shutting down), so the code carries over and the message is kept.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ...: the code's canonical name, as metrics labels and results use it.
const char* CodeName(absl::StatusCode code);

}  // namespace attn::server
