// The backends of this build in the order "auto" tries them, held by the default registry: the
// built ones, and those this build left out as unavailable.
#include "backends.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "attn/registry.h"

namespace attn {
namespace {

// A backend of the project that this build left out: listed, named and described like the
// others, and every verdict is Unsupported with `reason` ("cudnn: needs a CUDA device; this
// engine was built without CUDA"), so a request for it is answered as unsupported, not as an
// unknown name.
class UnavailableBackend final : public Backend {
 public:
  // `fp8_peer`: for an FP8 backend, its full-precision peer; it then reports what the built
  // backend would (takes_fp8_recipe, full_precision_peer), so ServerInfo says the same of it in
  // every build.
  UnavailableBackend(std::string name, std::string description, std::string reason,
                     std::string fp8_peer = "")
      : name_(std::move(name)),
        description_(absl::StrCat(description, " (not in this build)")),
        reason_(std::move(reason)),
        fp8_peer_(std::move(fp8_peer)) {}
  std::string name() const override { return name_; }
  std::string description() const override { return description_; }
  bool takes_fp8_recipe() const override { return !fp8_peer_.empty(); }
  std::string full_precision_peer() const override { return fp8_peer_; }
  absl::Status CheckSupport(const AttentionProblem&, const DeviceInfo&) const override {
    return Unsupported(reason_);
  }
  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem&, DeviceContext&,
                                         const RunOptions&) const override {
    return Unsupported(reason_);
  }
  absl::Status Run(const RunArgs&) const override { return Unsupported(reason_); }

 private:
  const std::string name_, description_, reason_, fp8_peer_;
};

// Registers every backend of the project, fastest first: the built ones, and the others as
// unavailable.
void AddBuiltinBackends(BackendRegistry& registry) {
#if ATTN_HAVE_CUDA
  const char* no_cudnn = "cudnn: this engine was built without cuDNN";
  const char* no_cudnn_fp8 = "cudnn_fp8: this engine was built without cuDNN";
#else
  const char* no_cudnn = "cudnn: needs a CUDA device; this engine was built without CUDA";
  const char* no_cudnn_fp8 = "cudnn_fp8: needs a CUDA device; this engine was built without CUDA";
#endif
#if ATTN_HAVE_CUDNN
  (void)no_cudnn;
  (void)no_cudnn_fp8;
  registry.Add(MakeCudnnBackend());
#else
  registry.Add(std::make_unique<UnavailableBackend>(
      "cudnn", "cuDNN fused flash attention (SDPA forward)", no_cudnn));
#endif
#if ATTN_HAVE_CUDA
  registry.Add(MakeFusedBackend());
  registry.Add(MakeNaiveBackend());
#else
  registry.Add(std::make_unique<UnavailableBackend>(
      "fused", "our flash-attention kernel",
      "fused: needs a CUDA device; this engine was built without CUDA"));
  registry.Add(std::make_unique<UnavailableBackend>(
      "naive", "cuBLAS GEMM + softmax kernel + GEMM",
      "naive: needs a CUDA device; this engine was built without CUDA"));
#endif
  registry.Add(MakeCpuBackend());
  // After cpu, which runs every problem it runs: "auto" never picks the float64 reference.
  registry.Add(MakeReferenceBackend());
  // Last: FP8 changes results far beyond rounding, so "auto" must never pick it (every problem
  // it takes, cudnn takes first).
#if ATTN_HAVE_CUDNN
  registry.Add(MakeCudnnFp8Backend());
#else
  registry.Add(std::make_unique<UnavailableBackend>(
      "cudnn_fp8", "cuDNN FP8 fused attention (sdpa_fp8 forward)", no_cudnn_fp8, "cudnn"));
#endif
}

}  // namespace

const BackendRegistry& BackendRegistry::Default() {
  static const BackendRegistry* registry = [] {
    auto* r = new BackendRegistry();
    AddBuiltinBackends(*r);
    return r;
  }();
  return *registry;
}

std::string CudnnVersion() {
#if ATTN_HAVE_CUDNN
  return CudnnLibraryVersion();
#else
  return "";
#endif
}

}  // namespace attn
