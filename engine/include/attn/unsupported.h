// "This backend cannot run this problem here": the one status every support rule returns.
#pragma once

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace attn {

// Unsupported (dtype, head dim, architecture, library version, no CUDA device) is
// FailedPrecondition, one code for every backend's rule, end to end (clients report it as
// unsupported). InvalidArgument is only for input that is wrong on every backend.
[[nodiscard]] inline absl::Status Unsupported(std::string message) {
  return absl::FailedPreconditionError(std::move(message));
}
inline bool IsUnsupported(const absl::Status& status) {
  return status.code() == absl::StatusCode::kFailedPrecondition;
}

// One support rule, read like documentation:
//   ATTN_UNSUPPORTED_IF(p.head_dim % 8 != 0, "cudnn: head_dim must be a multiple of 8; got %d",
//                       p.head_dim);
#define ATTN_UNSUPPORTED_IF(cond, ...)                                    \
  do {                                                                    \
    if (cond) return ::attn::Unsupported(::absl::StrFormat(__VA_ARGS__)); \
  } while (0)

}  // namespace attn
