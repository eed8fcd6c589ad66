// `cpu`: fast attention on the host, the embedded default without a GPU. float32 compute
// (bfloat16/float16 inputs widened to float32, the output rounded once to the input's dtype),
// flash-style blocks with the online softmax (cpu/flash.h), tasks spread over the host pool.
#include <atomic>

#include "absl/strings/str_format.h"
#include "backends.h"
#include "cpu/flash.h"
#include "cpu/thread_pool.h"

namespace attn {
namespace {

// Bytes of one thread's scratch, whole cache lines so every thread's starts on one.
int64_t ScratchBytesPerThread(int64_t head_dim) {
  return (FlashScratchFloats(head_dim) * static_cast<int64_t>(sizeof(float)) + 63) / 64 * 64;
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return absl::StrFormat(
        "float32 flash attention on the host (%s SIMD, %d threads): online softmax; bfloat16 and "
        "float16 widened to float32",
        FlashTarget(), HostThreads());
  }

  bool checks_stop_while_running() const override { return true; }

  absl::Status CheckSupport(const AttentionProblem&, const DeviceInfo& device) const override {
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCpu,
                        "cpu: runs on the host only; pick a GPU backend for a CUDA device");
    return absl::OkStatus();
  }

  // One scratch per thread the call may use, and a cache line to align the first.
  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext&,
                                         const RunOptions& options = {}) const override {
    return HostCallThreads(options.host_threads) * ScratchBytesPerThread(p.head_dim) + 64;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    if (args.tensors.out.memory != MemoryKind::kHost) {
      return absl::InvalidArgumentError("cpu: tensors must be in host memory");
    }
    const int threads = HostCallThreads(args.options.host_threads);
    const int64_t per_thread = ScratchBytesPerThread(p.head_dim);
    const int64_t need = threads * per_thread + 64;
    if (args.workspace_bytes < need) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cpu: workspace of %d bytes is smaller than the %d needed", args.workspace_bytes, need));
    }
    const uintptr_t base = (reinterpret_cast<uintptr_t>(args.workspace) + 63) / 64 * 64;
    FlashCall call(p, args.tensors, args.options.stop);
    std::atomic<int64_t> next{0};
    // One index per thread, each with its own scratch, taking tasks in order until none is left.
    HostPool().ParallelFor(
        std::min<int64_t>(threads, call.tasks),
        [&](int64_t slot) {
          float* scratch = reinterpret_cast<float*>(base + slot * per_thread);
          for (int64_t task = next++; task < call.tasks; task = next++) {
            if (call.ShouldStop()) return;
            FlashTask(call, task, scratch);
          }
        },
        threads);
    if (call.stopped) return args.options.stop->Check();
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace attn
