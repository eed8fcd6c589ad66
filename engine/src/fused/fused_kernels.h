// Kernels of the `fused` backend, launched from fused_backend.cc (the one launch file). Plain
// CUDA types only, so nvcc never compiles abseil. Each head dim is instantiated in its own
// fused_hdim<H>.cu, so the five instantiations build in parallel and each stays short.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

namespace attn {

// One params struct per launch, passed by value. Strides are in elements; the head dimension is
// contiguous (stride 1). Query head n reads K/V head n / group (GQA/MQA without copies).
struct FusedParams {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t o_batch_stride, o_row_stride, o_head_stride;
  int batch, heads, group, q_len, kv_len;
  // Keys batch element b sees: kv_lens[b] (device memory, clamped to [0, kv_len] on read), or all
  // kv_len when null.
  const int32_t* kv_lens;
  float scale_log2;  // softmax scale * log2(e): scores go through exp2f
  bool causal;       // top-left aligned: query t sees keys s <= t
  // The warp-specialised kernel's tile counter (kWgmmaWsWorkspaceBytes of workspace; its launch
  // zeroes it) where its tile takes items dynamically (FusedWgmmaWsTakesTileCounter), or null;
  // that kernel's persistent grid is one block per SM of the device's `multiprocessors`.
  int32_t* tile_counter;
  int multiprocessors;
};

enum class FusedHalfType { kBFloat16, kFloat16 };

// The tensor-core kernel a bf16/fp16 problem runs on: mma.sync (sm_80 and newer: fused_kernel.cuh),
// warpgroup MMA (sm_90a, H100/H200, WgmmaHeadDim: fused_wgmma.cuh), its warp-specialised form
// (a TMA producer warpgroup and two consumers: fused_wgmma_ws.cuh; problems with kv_lens run
// kWgmma) or split-KV for short queries (sm_80 and newer: fused_split_kv.cuh).
enum class FusedPath { kMmaSync, kWgmma, kSplitKv, kWgmmaWs };

// How the split-KV kernel cuts a problem (split_kv_plan.h plans it), and its workspace.
struct FusedSplitKv {
  int row_tiles = 1;   // 16-row mma slices of packed (query, group) rows per block: 1, 2 or 4
  int row_groups = 1;  // blocks along the packed rows: ceil(T * group / (16 * row_tiles))
  int splits = 1;      // key ranges per (batch, K/V head, row group), one block each
  int split_keys = 0;  // keys per range: a multiple of kSplitKvTileKeys
  int stages = 2;      // K/V tile pairs in shared memory: 2 or 3, up to kSplitKvMaxTmaStages forced
  bool tma = false;    // K/V through TMA bulk tensor copies (compute capability 9.0+, H % 64 == 0)
  // The merge kernel launched as a programmatic dependent of the split kernel (compute capability
  // 9.0+): it starts while the split kernel's last blocks run and waits for their memory.
  bool dependent_merge = false;
  // splits > 1: (B, K, row_groups, splits, 16 * row_tiles) rows of normalised partial O (H
  // floats each) and their log2-sum-exp, which a second kernel merges.
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
};

// The split-KV kernel's shared memory: 16 * row_tiles padded Q rows, `stages` K/V tile pairs of
// kSplitKvTileKeys keys (all but one in flight while one is computed), and the warps' row
// statistics. split_kv_plan.cc picks the stages (2 or 3) that fit the device; TMA plans may be
// forced to more (SetSplitKvStagesOverride), up to the kernel's barriers for them.
constexpr int kSplitKvTileKeys = 64;
constexpr int kSplitKvMaxTmaStages = 6;
constexpr int kSplitKvWarps = 4;
constexpr int64_t kMaxGridYz = 65535;  // CUDA's limit on gridDim.y and gridDim.z
constexpr int SplitKvSmemBytes(int head_dim, int row_tiles, int stages) {
  return (16 * row_tiles + 2 * stages * kSplitKvTileKeys) * (head_dim + 8) * 2 +
         kSplitKvWarps * 16 * 2 * 4;
}

// The head dims the fused backend compiles, each in its own fused_hdim<H>.cu: the one list that
// support checks, messages, dispatch and instantiations read.
#define ATTN_FUSED_HEAD_DIMS(X) X(32) X(64) X(96) X(128) X(256)
constexpr bool FusedHeadDim(int h) {
#define ATTN_FUSED_IS(H) h == H ||
  return ATTN_FUSED_HEAD_DIMS(ATTN_FUSED_IS) false;
#undef ATTN_FUSED_IS
}
// The head dims that have a wgmma kernel (all but 32: its 64-byte rows would leave half of
// every 128-byte swizzle row empty, and mma.sync serves it well).
constexpr bool WgmmaHeadDim(int h) { return FusedHeadDim(h) && h != 32; }
// The head dims whose warp-specialised wgmma kernel the automatic choice takes (measured faster
// than the cp.async one; H = 256 fits only two stages of 64 keys and was slower: NOTES.md).
constexpr bool WgmmaWsHeadDim(int h) { return h == 64 || h == 96 || h == 128; }
// Query rows of a warp-specialised block (two consumer warpgroups of 64), and its workspace (a
// tile counter, 16 bytes to keep what follows aligned).
constexpr int kWgmmaWsBlockM = 128;
constexpr int64_t kWgmmaWsWorkspaceBytes = 16;

// Whether this build holds the wgmma kernel for `head_dim` (CMake defines ATTN_FUSED_WGMMA when
// CMAKE_CUDA_ARCHITECTURES names 90a).
bool FusedWgmmaBuilt(int head_dim);

// Forces one path where it can run (tests and side-by-side benchmarks; kWgmma and kWgmmaWs where
// the wgmma kernels can, mma.sync otherwise); std::nullopt restores the automatic choice. Without
// a call, the environment variable ATTN_FUSED_KERNEL=mma_sync|wgmma|wgmma_ws|split_kv sets it for
// the process.
void SetFusedPathOverride(std::optional<FusedPath> path);

// bf16/fp16 on tensor cores (fp32 accumulation) along `path`; kWgmma or kWgmmaWs for a head dim
// without those kernels runs mma.sync. Needs 16-byte aligned tensors whose batch/row/head
// strides are multiples of 8 elements.
template <int kHeadDim>
cudaError_t LaunchFusedHalf(const FusedParams& params, FusedHalfType type, FusedPath path,
                            cudaStream_t stream);

// float32 on CUDA cores (fp32 FMA, no TF32): any alignment.
template <int kHeadDim>
cudaError_t LaunchFusedFloat(const FusedParams& params, cudaStream_t stream);

// bf16/fp16 split-KV (mma.sync) with `plan`'s workspace pointers set; same alignment rules.
template <int kHeadDim>
cudaError_t LaunchFusedSplitKv(const FusedParams& params, const FusedSplitKv& plan,
                               FusedHalfType type, cudaStream_t stream);

// Whether this build's warp-specialised kernel for `kHeadDim` takes its items from a tile
// counter (FusedParams::tile_counter, kWgmmaWsWorkspaceBytes of workspace).
template <int kHeadDim>
bool FusedWgmmaWsTakesTileCounter();

// The compiled head dims, one fused_hdim<H>.cu each.
#define ATTN_FUSED_DECLARE(H)                                                                  \
  extern template cudaError_t LaunchFusedHalf<H>(const FusedParams&, FusedHalfType, FusedPath, \
                                                 cudaStream_t);                                \
  extern template cudaError_t LaunchFusedFloat<H>(const FusedParams&, cudaStream_t);           \
  extern template cudaError_t LaunchFusedSplitKv<H>(const FusedParams&, const FusedSplitKv&,   \
                                                    FusedHalfType, cudaStream_t);              \
  extern template bool FusedWgmmaWsTakesTileCounter<H>();
ATTN_FUSED_HEAD_DIMS(ATTN_FUSED_DECLARE)
#undef ATTN_FUSED_DECLARE

}  // namespace attn
