// `fused`: our own flash-attention forward kernel: one launch, the (T, S) scores never leave
// registers, workspace 0. bf16/fp16 on tensor cores: wgmma on H100/H200 for head dims 64 and 128
// (fused_wgmma.cuh), mma.sync elsewhere (fused_kernel.cuh, sm_80+); float32 on CUDA cores in
// exact fp32. This file is the one place that turns the run-time problem (dtype, head dim,
// device) into a compile-time instantiation.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "backends.h"
#include "cuda/check.h"
#include "fused/fused_kernels.h"

namespace attn {

bool FusedWgmmaBuilt(int head_dim) {
#if defined(ATTN_FUSED_WGMMA)
  return head_dim == 64 || head_dim == 128;
#else
  (void)head_dim;
  return false;
#endif
}

namespace {

// -1: automatic; otherwise a FusedPath forced by SetFusedPathOverride or ATTN_FUSED_KERNEL.
std::atomic<int>& PathOverride() {
  static std::atomic<int> forced([] {
    const char* v = std::getenv("ATTN_FUSED_KERNEL");
    if (v == nullptr) return -1;
    if (std::strcmp(v, "mma_sync") == 0) return static_cast<int>(FusedPath::kMmaSync);
    if (std::strcmp(v, "wgmma") == 0) return static_cast<int>(FusedPath::kWgmma);
    return -1;
  }());
  return forced;
}

FusedPath PathFor(int64_t head_dim, const DeviceInfo& device) {
  const bool wgmma =
      FusedWgmmaBuilt(static_cast<int>(head_dim)) && device.cc_major == 9 && device.cc_minor == 0;
  const int forced = PathOverride().load(std::memory_order_relaxed);
  if (forced == static_cast<int>(FusedPath::kMmaSync) || !wgmma) return FusedPath::kMmaSync;
  return FusedPath::kWgmma;
}

constexpr int64_t kMaxGridYz = 65535;  // CUDA's limit on gridDim.y (heads) and gridDim.z (batch)

bool CompiledHeadDim(int64_t h) { return h == 32 || h == 64 || h == 96 || h == 128 || h == 256; }

// The tensor-core kernel copies 16-byte chunks (cp.async): every row start must be 16-byte
// aligned, so the base and the batch, row and head strides too (8 half elements).
absl::Status CheckHalfAlignment(const TensorView& t, const char* name) {
  const bool base_ok = reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
  const bool strides_ok = t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0 && t.strides[2] % 8 == 0;
  if (base_ok && strides_ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "fused: %s needs a 16-byte aligned base and batch/row/head strides that are multiples of 8 "
      "elements (16-byte cp.async copies); got strides (%d, %d, %d)",
      name, t.strides[0], t.strides[1], t.strides[2]));
}

template <int kHeadDim>
cudaError_t Launch(const FusedParams& params, DType dtype, FusedPath path, cudaStream_t stream) {
  switch (dtype) {
    case DType::kFloat32:
      return LaunchFusedFloat<kHeadDim>(params, stream);
    case DType::kBFloat16:
      return LaunchFusedHalf<kHeadDim>(params, FusedHalfType::kBFloat16, path, stream);
    case DType::kFloat16:
      return LaunchFusedHalf<kHeadDim>(params, FusedHalfType::kFloat16, path, stream);
  }
  return cudaErrorInvalidValue;
}

class FusedBackend final : public Backend {
 public:
  std::string name() const override { return "fused"; }
  std::string description() const override {
    return "our flash-attention kernel: online softmax, scores in registers; bf16/fp16 on tensor "
           "cores (wgmma on H100/H200 for head dims 64 and 128, mma.sync elsewhere), float32 on "
           "CUDA cores";
  }

  absl::Status CheckSupport(const AttentionProblem& p, const DeviceInfo& device) const override {
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCuda, "fused: needs a CUDA device");
    ATTN_UNSUPPORTED_IF(device.cc_major < 8,
                        "fused: needs compute capability >= 8.0 (cp.async, bf16/fp16 mma.sync); "
                        "device has %d.%d",
                        device.cc_major, device.cc_minor);
    ATTN_UNSUPPORTED_IF(!CompiledHeadDim(p.head_dim),
                        "fused: head_dim %d is not compiled; supported: 32, 64, 96, 128, 256",
                        p.head_dim);
    ATTN_UNSUPPORTED_IF(p.num_heads > kMaxGridYz || p.batch > kMaxGridYz,
                        "fused: batch (%d) and num_heads (%d) must be <= %d (one grid dimension "
                        "each)",
                        p.batch, p.num_heads, kMaxGridYz);
    ATTN_UNSUPPORTED_IF(p.q_len > kIntMax || p.kv_len > kIntMax,
                        "fused: q_len (%d) and kv_len (%d) must be <= %d", p.q_len, p.kv_len,
                        kIntMax);
    ATTN_UNSUPPORTED_IF(!p.kv_lens.empty(), "fused: kv_lens not supported yet");
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem&, DeviceContext&,
                                         const RunOptions& = {}) const override {
    return 0;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("fused: tensors must be in device memory");
    }
    if (!CompiledHeadDim(p.head_dim)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fused: head_dim %d is not compiled; supported: 32, 64, 96, 128, 256", p.head_dim));
    }
    if (p.dtype != DType::kFloat32) {
      for (const auto& [view, name] : {std::pair{&t.q, "q"}, std::pair{&t.k, "k"},
                                       std::pair{&t.v, "v"}, std::pair{&t.out, "out"}}) {
        if (auto s = CheckHalfAlignment(*view, name); !s.ok()) return s;
      }
    }
    FusedParams fp{};
    fp.q = t.q.data;
    fp.k = t.k.data;
    fp.v = t.v.data;
    fp.out = t.out.data;
    fp.q_batch_stride = t.q.strides[0];
    fp.q_row_stride = t.q.strides[1];
    fp.q_head_stride = t.q.strides[2];
    fp.k_batch_stride = t.k.strides[0];
    fp.k_row_stride = t.k.strides[1];
    fp.k_head_stride = t.k.strides[2];
    fp.v_batch_stride = t.v.strides[0];
    fp.v_row_stride = t.v.strides[1];
    fp.v_head_stride = t.v.strides[2];
    fp.o_batch_stride = t.out.strides[0];
    fp.o_row_stride = t.out.strides[1];
    fp.o_head_stride = t.out.strides[2];
    fp.batch = static_cast<int>(p.batch);
    fp.heads = static_cast<int>(p.num_heads);
    fp.group = static_cast<int>(p.GroupSize());
    fp.q_len = static_cast<int>(p.q_len);
    fp.kv_len = static_cast<int>(p.kv_len);
    fp.scale_log2 = static_cast<float>(p.EffectiveScale() * M_LOG2E);
    fp.causal = p.causal;

    cudaStream_t stream = args.context.stream();
    const FusedPath path = PathFor(p.head_dim, args.context.info());
    switch (p.head_dim) {
      case 32:
        ATTN_CUDA_RETURN_IF_ERROR(Launch<32>(fp, p.dtype, path, stream));
        break;
      case 64:
        ATTN_CUDA_RETURN_IF_ERROR(Launch<64>(fp, p.dtype, path, stream));
        break;
      case 96:
        ATTN_CUDA_RETURN_IF_ERROR(Launch<96>(fp, p.dtype, path, stream));
        break;
      case 128:
        ATTN_CUDA_RETURN_IF_ERROR(Launch<128>(fp, p.dtype, path, stream));
        break;
      case 256:
        ATTN_CUDA_RETURN_IF_ERROR(Launch<256>(fp, p.dtype, path, stream));
        break;
    }
    return absl::OkStatus();
  }
};

}  // namespace

void SetFusedPathOverride(std::optional<FusedPath> path) {
  PathOverride().store(path.has_value() ? static_cast<int>(*path) : -1, std::memory_order_relaxed);
}

std::unique_ptr<Backend> MakeFusedBackend() { return std::make_unique<FusedBackend>(); }

}  // namespace attn
