#include "attn/attention.h"

#include "absl/strings/str_cat.h"

namespace attn {

absl::Status RunAttention(const Backend& backend, const AttentionProblem& problem,
                          const AttentionTensors& tensors, DeviceContext& context,
                          const RunOptions& options) {
  if (auto s = ValidateProblem(problem); !s.ok()) return s;
  if (auto s = ValidateTensors(tensors, problem); !s.ok()) return s;
  if (tensors.out.memory != context.memory()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensors: live in ", tensors.out.memory == MemoryKind::kHost ? "host" : "device",
        " memory but the context runs on ", context.info().ToString()));
  }
  if (auto s = backend.CheckSupport(problem, context.info()); !s.ok()) return s;
  auto bytes = backend.WorkspaceBytes(problem, context, options);
  if (!bytes.ok()) return bytes.status();
  auto workspace = context.arena().Allocate(*bytes);
  if (!workspace.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(backend.name(), " workspace for ",
                                                     problem.ToString(), ": ",
                                                     workspace.status().message()));
  }
  // The block returns to the arena when this function ends while the kernels may still be
  // queued: safe, because everything that can reuse the arena's memory is ordered after them on
  // the context's one stream.
  return backend.Run({problem, tensors, workspace->data(), workspace->size(), context, options});
}

}  // namespace attn
