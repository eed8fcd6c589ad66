// `cpu`: the reference backend, the float64 attention of attn/reference.h on the host (it also
// serves requests on machines without a GPU).
#include "absl/strings/str_format.h"
#include "attn/reference.h"
#include "backends.h"

namespace attn {
namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return absl::StrFormat("reference on the host: float64 accumulation, %d threads",
                           ReferenceThreads());
  }

  bool checks_stop_while_running() const override { return true; }

  absl::Status CheckSupport(const AttentionProblem&, const DeviceInfo& device) const override {
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCpu,
                        "cpu: runs on the host only; pick a GPU backend for a CUDA device");
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext&,
                                         const RunOptions& = {}) const override {
    return ReferenceScratchBytes(p);
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    if (args.tensors.out.memory != MemoryKind::kHost) {
      return absl::InvalidArgumentError("cpu: tensors must be in host memory");
    }
    auto need = ReferenceScratchBytes(p);
    if (!need.ok()) return need.status();
    if (args.workspace_bytes < *need) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cpu: workspace of %d bytes is smaller than the %d needed", args.workspace_bytes, *need));
    }
    return ReferenceAttention(p, args.tensors, args.workspace, args.options.stop,
                              args.options.host_threads);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace attn
