// Forced choices, for tests and side-by-side benchmarks: each setter replaces, for the whole
// process, one choice a backend otherwise makes itself (attn-bench's --fused_kernel,
// --split_kv_stages, --tma_l2_promotion, --fp8_chunks and --cpu_threads call them; the device
// cap, which --device_cap sets, is the device layer's: SetDeviceCapOverride in attn/device.h).
// Production calls none of them, and no environment variable sets them: a server's behaviour is its
// flags'. Plain C++ (nvcc reads FusedPath through the fused kernels' headers).
#pragma once

#include <optional>
#include <string_view>

namespace attn {

// The fused backend's bf16/fp16 kernels: mma.sync (sm_80 and newer), the cp.async wgmma kernel
// and its warp-specialised form (sm_90a builds on compute capability 9.0), split-KV for short
// queries (engine/src/fused/NOTES.md describes each).
enum class FusedPath { kMmaSync, kWgmma, kSplitKv, kWgmmaWs };
inline constexpr FusedPath kFusedPaths[] = {FusedPath::kMmaSync, FusedPath::kWgmma,
                                            FusedPath::kSplitKv, FusedPath::kWgmmaWs};

// "mma_sync", "wgmma", "split_kv", "wgmma_ws": the names attn-bench's --fused_kernel takes.
constexpr std::string_view FusedPathName(FusedPath path) {
  switch (path) {
    case FusedPath::kMmaSync:
      return "mma_sync";
    case FusedPath::kWgmma:
      return "wgmma";
    case FusedPath::kSplitKv:
      return "split_kv";
    case FusedPath::kWgmmaWs:
      return "wgmma_ws";
  }
  return "";
}
// The path FusedPathName calls `name`, or nullopt.
constexpr std::optional<FusedPath> FusedPathNamed(std::string_view name) {
  for (FusedPath path : kFusedPaths) {
    if (FusedPathName(path) == name) return path;
  }
  return std::nullopt;
}

// The setters below exist in builds with what they steer: the TMA promotion in CUDA builds
// (ATTN_HAVE_CUDA), cudnn_fp8's in cuDNN builds (ATTN_HAVE_CUDNN); the fused backend's choices
// (its host heuristics are built everywhere, so a build without CUDA tests them) and the host
// threads in every build. std::nullopt restores the automatic choice.

// Forces the fused backend onto `path` where it can run (kWgmma and kWgmmaWs where the wgmma
// kernels can, mma.sync otherwise; problems with kv_lens never take kWgmmaWs: its whole-tile
// boxes cannot stop at a sequence's length).
void SetFusedPathOverride(std::optional<FusedPath> path);

// Forces the K/V stages of the fused split-KV kernel's TMA plans to `stages`, 2 to 6, where a
// block of them fits the device (else the automatic choice stays); a number outside that range
// means automatic.
void SetSplitKvStagesOverride(std::optional<int> stages);

// Sets the L2 promotion of every TMA copy's requests, in bytes: 0 (none), 64, 128 (the default)
// or 256; any other number means the default. Applies to tensor maps encoded after the call.
void SetTmaL2PromotionOverride(std::optional<int> bytes);

// Forces cudnn_fp8's batch chunks a call (1, 2 or 4) where the count divides the batch.
void SetFp8ChunksOverride(std::optional<int> chunks);

// Sets the threads the host backends (cpu, reference) run on, `threads` >= 1 (default: one per
// hardware thread). Returns false, changing nothing, once their thread pool exists (after the
// first host backend call): call it first.
bool SetHostThreads(std::optional<int> threads);

}  // namespace attn
