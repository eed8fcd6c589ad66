#include "proto/status.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace attn {
namespace {

constexpr std::pair<absl::StatusCode, grpc::StatusCode> kCodes[] = {
    {absl::StatusCode::kOk, grpc::StatusCode::OK},
    {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
    {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
    {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
    {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
    {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
    {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
    {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
    {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
    {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
    {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
    {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
    {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
    {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
    {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
    {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
    {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
};

}  // namespace

grpc::StatusCode ToGrpcCode(absl::StatusCode code) {
  for (const auto& [a, g] : kCodes) {
    if (a == code) return g;
  }
  return grpc::StatusCode::UNKNOWN;
}

absl::StatusCode FromGrpcCode(grpc::StatusCode code) {
  for (const auto& [a, g] : kCodes) {
    if (g == code) return a;
  }
  return absl::StatusCode::kUnknown;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(ToGrpcCode(status.code()), BoundedMessage(status.message()));
}

std::string BoundedMessage(absl::string_view message) {
  constexpr size_t kMost = 1024;
  if (message.size() <= kMost) return std::string(message);
  return absl::StrCat(message.substr(0, kMost), "... (", message.size(), " bytes)");
}

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }
std::string CodeName(grpc::StatusCode code) { return CodeName(FromGrpcCode(code)); }

int CodeNumber(absl::StatusCode code) { return static_cast<int>(ToGrpcCode(code)); }
absl::StatusCode CodeFromNumber(int number) {
  for (const auto& [a, g] : kCodes) {
    if (static_cast<int>(g) == number) return a;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace attn
