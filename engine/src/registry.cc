#include "attn/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace attn {

void BackendRegistry::Add(std::unique_ptr<Backend> backend) {
  backends_.push_back(std::move(backend));
}

const Backend* BackendRegistry::Find(absl::string_view name) const {
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

std::vector<BackendVerdict> BackendRegistry::Verdicts(const AttentionProblem& problem,
                                                      const DeviceInfo& device) const {
  std::vector<BackendVerdict> out;
  for (const auto& b : backends_) out.push_back({b.get(), b->CheckSupport(problem, device)});
  return out;
}

absl::StatusOr<const Backend*> BackendRegistry::Resolve(absl::string_view name,
                                                        const AttentionProblem& problem,
                                                        const DeviceInfo& device) const {
  if (name == kAutoBackend) {
    std::vector<std::string> reasons;
    for (const auto& v : Verdicts(problem, device)) {
      if (v.support.ok()) return v.backend;
      reasons.push_back(std::string(v.support.message()));
    }
    return Unsupported(absl::StrCat("backend: no backend supports ", problem.ToString(), " on ",
                                    device.ToString(), ": ", absl::StrJoin(reasons, "; ")));
  }
  const Backend* backend = Find(name);
  if (backend == nullptr) {
    std::vector<std::string> names{std::string(kAutoBackend)};
    for (const auto& b : backends_) names.push_back(b->name());
    return absl::InvalidArgumentError(absl::StrCat(
        "backend: unknown '", name, "'; expected one of ", absl::StrJoin(names, ", ")));
  }
  if (auto s = backend->CheckSupport(problem, device); !s.ok()) return s;
  return backend;
}

}  // namespace attn
