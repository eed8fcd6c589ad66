// The set of backends an engine offers, their support verdicts, and the choice behind "auto".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/backend.h"

namespace attn {

// Name that asks the registry to pick the fastest supported backend.
inline constexpr absl::string_view kAutoBackend = "auto";

struct BackendVerdict {
  const Backend* backend;
  absl::Status support;  // OK, or the reason it cannot run the problem
};

class BackendRegistry {
 public:
  // Every backend of the project, fastest first (the order "auto" tries them in): cudnn, fused,
  // naive, cpu, reference, then cudnn_fp8, which auto never picks. Those this build left out are
  // listed too, always unsupported with the reason. Defined with the built-in backends
  // (backends.cc).
  static const BackendRegistry& Default();

  // Appends `backend`; later additions rank below earlier ones for "auto".
  void Add(std::unique_ptr<Backend> backend);

  const std::vector<std::unique_ptr<Backend>>& backends() const { return backends_; }
  const Backend* Find(absl::string_view name) const;  // nullptr when unknown

  // One verdict per backend, in preference order.
  std::vector<BackendVerdict> Verdicts(const AttentionProblem& problem,
                                       const DeviceInfo& device) const;

  // `name` when it is known and supports the problem; for "auto", the first supporting backend.
  // Errors: InvalidArgument for a name the project has never had (listing the known ones); the
  // backend's own Unsupported reason when a named backend cannot, also one this build left out;
  // Unsupported listing every reason when none can.
  absl::StatusOr<const Backend*> Resolve(absl::string_view name, const AttentionProblem& problem,
                                         const DeviceInfo& device) const;

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace attn
