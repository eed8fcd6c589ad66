// `reference`: the float64 attention of attn/reference.h on the host, the backend every other
// one is checked against (numerics tests, the benchmark runner's check, --check). Never `auto`'s
// choice: `cpu` runs every problem it runs, faster.
#include "absl/strings/str_format.h"
#include "attn/reference.h"
#include "backends.h"
#include "cpu/thread_pool.h"

namespace attn {
namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string name() const override { return "reference"; }
  std::string description() const override {
    return absl::StrFormat(
        "float64 reference on the host: inputs widened to float64, float64 accumulation, %d "
        "threads",
        HostThreads());
  }

  bool checks_stop_while_running() const override { return true; }

  absl::Status CheckSupport(const AttentionProblem&, const DeviceInfo& device) const override {
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCpu,
                        "reference: runs on the host only; pick a GPU backend for a CUDA device");
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext&,
                                         const RunOptions& = {}) const override {
    return ReferenceScratchBytes(p);
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    if (args.tensors.out.memory != MemoryKind::kHost) {
      return absl::InvalidArgumentError("reference: tensors must be in host memory");
    }
    auto need = ReferenceScratchBytes(p);
    if (!need.ok()) return need.status();
    if (args.workspace_bytes < *need) {
      return absl::InvalidArgumentError(
          absl::StrFormat("reference: workspace of %d bytes is smaller than the %d needed",
                          args.workspace_bytes, *need));
    }
    return ReferenceAttention(p, args.tensors, args.workspace, args.options.stop,
                              args.options.host_threads);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeReferenceBackend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace attn
