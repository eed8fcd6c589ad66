// `fused`: our own flash-attention forward kernel: the (T, S) scores never leave registers.
// bf16/fp16 on tensor cores: wgmma on H100/H200 for head dims 64 to 256 (wgmma_kernel.cuh and
// the warp-specialised wgmma_ws_kernel.cuh), mma.sync elsewhere (mma_sync_kernel.cuh, sm_80+),
// split-KV for short queries (split_kv_kernel.cuh: a second small kernel merges the splits,
// workspace for their partial outputs); float32 on CUDA cores in exact fp32 (float_kernel.cuh).
// This file is the one place that turns the run-time problem (dtype, head dim, device) into a
// compile-time instantiation; heuristics.h makes the decisions it applies.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/strings/str_format.h"
#include "attn/overrides.h"
#include "backends.h"
#include "cuda/check.h"
#include "fused/fused_kernels.h"
#include "fused/heuristics.h"
#include "fused/tiles.h"

namespace attn {

namespace {

// The kernel `p` runs on: ChoosePath with the forced path, if any.
FusedPath PathFor(const AttentionProblem& p, const DeviceInfo& device) {
  return ChoosePath(p, device, FusedPathOverride());
}

// "32, 64, 96, 128, 256"
std::string CompiledHeadDims() {
  std::string list;
  for (const FusedTiles& t : kFusedTiles) {
    list += (list.empty() ? "" : ", ") + std::to_string(t.head_dim);
  }
  return list;
}

bool CompiledHeadDim(int64_t h) { return h > 0 && h <= 256 && FusedHeadDim(static_cast<int>(h)); }

// Calls launch(std::integral_constant<int, H>{}) for the compiled head dim H that equals
// `head_dim` (CheckSupport has made sure there is one).
template <typename F, size_t... I>
cudaError_t ForHeadDim(int64_t head_dim, F&& launch, std::index_sequence<I...>) {
  cudaError_t error = cudaErrorInvalidValue;
  ((head_dim == kFusedTiles[I].head_dim &&
    (error = launch(std::integral_constant<int, kFusedTiles[I].head_dim>{}), true)) ||
   ...);
  return error;
}
template <typename F>
cudaError_t ForHeadDim(int64_t head_dim, F&& launch) {
  return ForHeadDim(head_dim, std::forward<F>(launch),
                    std::make_index_sequence<std::size(kFusedTiles)>{});
}

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

class FusedBackend final : public Backend {
 public:
  std::string name() const override { return "fused"; }
  std::string description() const override {
    return "our flash-attention kernel: online softmax, scores in registers; bf16/fp16 on tensor "
           "cores (wgmma on H100/H200 for head dims 64-256, mma.sync elsewhere, split-KV for short "
           "queries), float32 on CUDA cores";
  }

  absl::Status CheckSupport(const AttentionProblem& p, const DeviceInfo& device) const override {
    constexpr int64_t kIntMax = std::numeric_limits<int>::max();
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCuda, "fused: needs a CUDA device");
    ATTN_UNSUPPORTED_IF(device.cc_major < 8,
                        "fused: needs compute capability >= 8.0 (cp.async, bf16/fp16 mma.sync); "
                        "device has %d.%d",
                        device.cc_major, device.cc_minor);
    ATTN_UNSUPPORTED_IF(!CompiledHeadDim(p.head_dim),
                        "fused: head_dim %d is not compiled; supported: %s", p.head_dim,
                        CompiledHeadDims());
    ATTN_UNSUPPORTED_IF(p.num_heads > kMaxGridYz || p.batch > kMaxGridYz,
                        "fused: batch (%d) and num_heads (%d) must be <= %d (one grid dimension "
                        "each)",
                        p.batch, p.num_heads, kMaxGridYz);
    ATTN_UNSUPPORTED_IF(p.q_len > kIntMax || p.kv_len > kIntMax,
                        "fused: q_len (%d) and kv_len (%d) must be <= %d", p.q_len, p.kv_len,
                        kIntMax);
    return absl::OkStatus();
  }

  // Zero but for split-KV runs of more than one split (its partial outputs) and the
  // warp-specialised kernel (its tile counter).
  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext& context,
                                         const RunOptions& options = {}) const override {
    const AttentionProblem& whole = options.whole_call != nullptr ? *options.whole_call : p;
    const FusedPath path = PathFor(whole, context.info());
    if (path == FusedPath::kWgmmaWs) return kWgmmaWsWorkspaceBytes;
    if (path != FusedPath::kSplitKv) return 0;
    return SplitKvWorkspaceBytes(PlanSplitKvPiece(p, whole, context.info()), p);
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("fused: tensors must be in device memory");
    }
    if (!CompiledHeadDim(p.head_dim)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fused: head_dim %d is not compiled; supported: %s", p.head_dim, CompiledHeadDims()));
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
    fp.kv_lens = t.kv_lens;
    fp.scale_log2 = static_cast<float>(p.EffectiveScale() * M_LOG2E);
    fp.causal = p.causal;
    fp.multiprocessors = args.context.info().multiprocessors;

    cudaStream_t stream = args.context.stream();
    // A piece of a call runs the whole call's kernel and key splits (RunOptions::whole_call).
    const AttentionProblem& whole =
        args.options.whole_call != nullptr ? *args.options.whole_call : p;
    const FusedPath path = PathFor(whole, args.context.info());
    FusedSplitKv plan;
    if (path == FusedPath::kSplitKv) {
      plan = PlanSplitKvPiece(p, whole, args.context.info());
      const int64_t need = SplitKvWorkspaceBytes(plan, p);
      if (args.workspace_bytes < need) {
        return absl::InvalidArgumentError(
            absl::StrFormat("fused: split-KV needs %d bytes of workspace (WorkspaceBytes); got %d",
                            need, args.workspace_bytes));
      }
      if (need > 0) {
        plan.partial_out = static_cast<float*>(args.workspace);
        plan.partial_lse = plan.partial_out + SplitKvPartialRows(plan, p) * p.head_dim;
      }
    }
    if (path == FusedPath::kWgmmaWs) {
      if (args.workspace_bytes < kWgmmaWsWorkspaceBytes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fused: the warp-specialised kernel needs %d bytes of workspace (WorkspaceBytes); got "
            "%d",
            kWgmmaWsWorkspaceBytes, args.workspace_bytes));
      }
      fp.tile_counter = static_cast<int32_t*>(args.workspace);
    }
    const FusedHalfType type =
        p.dtype == DType::kBFloat16 ? FusedHalfType::kBFloat16 : FusedHalfType::kFloat16;
    const int ws_head_group =
        path == FusedPath::kWgmmaWs
            ? WsHeadGroup(p.causal, p.num_heads * p.batch, WsQueryTiles(p), fp.multiprocessors)
            : 1;
    ATTN_CUDA_RETURN_IF_ERROR(ForHeadDim(p.head_dim, [&](auto h) {
      using Launch = FusedLaunch<decltype(h)::value>;
      if (p.dtype == DType::kFloat32) return Launch::Float(fp, stream);
      if (path == FusedPath::kSplitKv) {
        return Launch::SplitKv(fp, plan, CombineWarps(plan, static_cast<int>(p.head_dim)), type,
                               stream);
      }
      return Launch::Half(fp, type, path, ws_head_group, stream);
    }));
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeFusedBackend() { return std::make_unique<FusedBackend>(); }

}  // namespace attn
