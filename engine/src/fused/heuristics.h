// The fused backend's run-time decisions, one host function each (FlashAttention's heuristics.h
// plays this part there): which kernel a problem runs on, how the split-KV kernel cuts it and how
// many warps its merge gives a row, and how the warp-specialised kernel groups its work items.
// The tiles they read are tiles.h's; the measurements behind each rule are in NOTES.md. Host
// code without CUDA headers, built in every build (with the fused backend's forced choices,
// attn/overrides.h), so every rule is tested on any machine (tests/engine/fused_heuristics_test.cc,
// split_kv_plan_test.cc, ws_schedule_test.cc).
#pragma once

#include <cstdint>
#include <optional>

#include "attn/device.h"
#include "attn/overrides.h"
#include "attn/problem.h"
#include "fused/split_kv_plan.h"

namespace attn {

// Whether this build holds the wgmma kernels for `head_dim` (CMake defines ATTN_HAVE_SM90A when
// CMAKE_CUDA_ARCHITECTURES names 90a; never in a build without CUDA).
bool FusedWgmmaBuilt(int head_dim);

// The path SetFusedPathOverride forced, if any.
std::optional<FusedPath> FusedPathOverride();

// The kernel `p` runs on (bf16/fp16; float32 has one kernel), given `forced`
// (SetFusedPathOverride) where set. NOTES.md, "Tiles and paths, by head dim", says why.
FusedPath ChoosePath(const AttentionProblem& p, const DeviceInfo& device,
                     std::optional<FusedPath> forced);

// Whether the split-KV kernel can take `p` on `device`: half precision, a grid within CUDA's
// limits and blocks that fit the device's shared memory (not H = 256 on an L4's 99 KiB).
bool SplitKvFits(const AttentionProblem& p, const DeviceInfo& device);

// The split-KV plan for `p` on `device` (its SMs and shared memory; SplitKvFits must hold): the
// fewest modelled tile-times (work shared over the SMs, one block's own tiles, one per wave of
// blocks), the fewest splits on a tie; with kv_lens, only the keys within each length count.
// The workspace pointers are left null.
FusedSplitKv PlanSplitKv(const AttentionProblem& p, const DeviceInfo& device);

// The plan of `piece`, a part (batch elements, heads or query rows) of the call `whole`: the
// whole call's row slices and key splits, so every row is computed as in the whole call, with the
// piece's own number of row groups (RunOptions::whole_call).
FusedSplitKv PlanSplitKvPiece(const AttentionProblem& piece, const AttentionProblem& whole,
                              const DeviceInfo& device);

// Rows of `plan`'s partial outputs for `p`, (B, K, row groups, splits, 16 * row_tiles), each of
// H floats and one log2-sum-exp (0 with one split: the kernel writes the output itself).
int64_t SplitKvPartialRows(const FusedSplitKv& plan, const AttentionProblem& p);

// Bytes of those rows: partial_out (rows x H floats), then partial_lse (rows floats).
int64_t SplitKvWorkspaceBytes(const FusedSplitKv& plan, const AttentionProblem& p);

// Warps of the merge kernel a packed row takes for `plan` at `head_dim`: 1, 2 or 4, enough that
// each sums at most the table's combine_unroll splits where up to four times that many are to
// merge.
int CombineWarps(const FusedSplitKv& plan, int head_dim);

// (head, batch) pairs a group of the warp-specialised kernel's work items (ws_schedule.h): one
// where the items are alike (not causal); causal, enough that every SM gets two items of the
// group's longest. Between 1 and `pairs`.
int WsHeadGroup(bool causal, int64_t pairs, int64_t m_blocks, int multiprocessors);

// The warp-specialised kernel's query tiles (kWgmmaWsBlockM rows) of one (batch, head) of `p`.
int64_t WsQueryTiles(const AttentionProblem& p);

}  // namespace attn
