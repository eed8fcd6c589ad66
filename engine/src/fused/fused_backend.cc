// `fused`: our own flash-attention forward kernel: the (T, S) scores never leave registers.
// bf16/fp16 on tensor cores: wgmma on H100/H200 for head dims 64 to 256 (fused_wgmma.cuh),
// mma.sync elsewhere (fused_kernel.cuh, sm_80+), split-KV for short queries (fused_split_kv.cuh:
// a second small kernel merges the splits, workspace for their partial outputs); float32 on
// CUDA cores in exact fp32. This file is the one place that turns the run-time problem (dtype, head
// dim, device) into a compile-time instantiation.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "backends.h"
#include "cuda/check.h"
#include "fused/fused_kernels.h"
#include "fused/split_kv_plan.h"

namespace attn {

bool FusedWgmmaBuilt(int head_dim) {
#if defined(ATTN_FUSED_WGMMA)
  return WgmmaHeadDim(head_dim);
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
    if (std::strcmp(v, "wgmma_ws") == 0) return static_cast<int>(FusedPath::kWgmmaWs);
    if (std::strcmp(v, "split_kv") == 0) return static_cast<int>(FusedPath::kSplitKv);
    return -1;
  }());
  return forced;
}

// Packed (query, group) rows of one K/V head up to which short queries take the split-KV kernel:
// its largest block (four 16-row slices). Decode (T = 1..16 with groups of up to 4) is in.
constexpr int64_t kSplitKvMaxRows = 64;

// Half precision only, a grid x (K/V heads x row groups) within CUDA's 2^31 - 1, and blocks that
// fit the device's shared memory.
bool SplitKvFits(const AttentionProblem& p, const DeviceInfo& device) {
  const int64_t rows = p.q_len * p.GroupSize();
  return p.dtype != DType::kFloat32 &&
         p.num_kv_heads * ((rows + 63) / 64) <= std::numeric_limits<int>::max() &&
         SplitKvFitsDevice(p, device);
}

// The kernel `p` runs on: a forced path where it applies, else split-KV for short queries, else
// on compute capability 9.0 where built the warp-specialised wgmma kernel for WgmmaWsHeadDim and
// at least a wave of 128-row query tiles (below that it lost 2-6% to the cp.async wgmma kernel,
// NOTES.md), else the cp.async wgmma kernel, else mma.sync. Problems with kv_lens never take the
// warp-specialised kernel, forced or not: its whole-tile boxes cannot stop at a sequence's length.
// (float32 has one kernel.)
FusedPath PathFor(const AttentionProblem& p, const DeviceInfo& device) {
  const bool wgmma =
      FusedWgmmaBuilt(static_cast<int>(p.head_dim)) && device.cc_major == 9 && device.cc_minor == 0;
  const int forced = PathOverride().load(std::memory_order_relaxed);
  if (forced == static_cast<int>(FusedPath::kSplitKv) && SplitKvFits(p, device))
    return FusedPath::kSplitKv;
  if (forced == static_cast<int>(FusedPath::kMmaSync)) return FusedPath::kMmaSync;
  if (forced < 0 && SplitKvFits(p, device) && p.q_len * p.GroupSize() <= kSplitKvMaxRows) {
    return FusedPath::kSplitKv;
  }
  if (!wgmma) return FusedPath::kMmaSync;
  const bool ws = p.kv_lens.empty();
  if (forced == static_cast<int>(FusedPath::kWgmmaWs) && ws) return FusedPath::kWgmmaWs;
  if (forced == static_cast<int>(FusedPath::kWgmma) ||
      forced == static_cast<int>(FusedPath::kWgmmaWs)) {
    return FusedPath::kWgmma;
  }
  const int64_t tiles = (p.q_len + kWgmmaWsBlockM - 1) / kWgmmaWsBlockM * p.num_heads * p.batch;
  return ws && WgmmaWsHeadDim(static_cast<int>(p.head_dim)) && tiles >= device.multiprocessors
             ? FusedPath::kWgmmaWs
             : FusedPath::kWgmma;
}

bool CompiledHeadDim(int64_t h) { return h <= 256 && FusedHeadDim(static_cast<int>(h)); }

// "32, 64, 96, 128, 256"
std::string CompiledHeadDims() {
  std::string list;
#define ATTN_FUSED_LIST(H) list += (list.empty() ? "" : ", ") + std::to_string(H);
  ATTN_FUSED_HEAD_DIMS(ATTN_FUSED_LIST)
#undef ATTN_FUSED_LIST
  return list;
}
// Whether `p` runs the warp-specialised kernel with a tile counter in the workspace.
bool UsesTileCounter(const AttentionProblem& p, FusedPath path) {
  if (path != FusedPath::kWgmmaWs) return false;
  switch (p.head_dim) {
#define ATTN_FUSED_COUNTER(H) \
  case H:                     \
    return FusedWgmmaWsTakesTileCounter<H>();
    ATTN_FUSED_HEAD_DIMS(ATTN_FUSED_COUNTER)
#undef ATTN_FUSED_COUNTER
  }
  return false;
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

template <int kHeadDim>
cudaError_t Launch(const FusedParams& params, DType dtype, FusedPath path, const FusedSplitKv& plan,
                   cudaStream_t stream) {
  if (dtype == DType::kFloat32) return LaunchFusedFloat<kHeadDim>(params, stream);
  const FusedHalfType type =
      dtype == DType::kBFloat16 ? FusedHalfType::kBFloat16 : FusedHalfType::kFloat16;
  if (path == FusedPath::kSplitKv) return LaunchFusedSplitKv<kHeadDim>(params, plan, type, stream);
  return LaunchFusedHalf<kHeadDim>(params, type, path, stream);
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

  // Zero but for split-KV runs of more than one split (its partial outputs) and builds whose
  // warp-specialised kernel takes a tile counter.
  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext& context,
                                         const RunOptions& options = {}) const override {
    const AttentionProblem& whole = options.whole_call != nullptr ? *options.whole_call : p;
    const FusedPath path = PathFor(whole, context.info());
    if (UsesTileCounter(p, path)) return kWgmmaWsWorkspaceBytes;
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
    if (UsesTileCounter(p, path)) {
      if (args.workspace_bytes < kWgmmaWsWorkspaceBytes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fused: the warp-specialised kernel needs %d bytes of workspace (WorkspaceBytes); got "
            "%d",
            kWgmmaWsWorkspaceBytes, args.workspace_bytes));
      }
      fp.tile_counter = static_cast<int32_t*>(args.workspace);
    }
    switch (p.head_dim) {
#define ATTN_FUSED_CASE(H)                                                 \
  case H:                                                                  \
    ATTN_CUDA_RETURN_IF_ERROR(Launch<H>(fp, p.dtype, path, plan, stream)); \
    break;
      ATTN_FUSED_HEAD_DIMS(ATTN_FUSED_CASE)
#undef ATTN_FUSED_CASE
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
