// How the fused backend's split-KV kernel (fused_split_kv.cuh) cuts a problem: row slices, key
// splits, shared-memory stages, and the workspace for the splits' partial outputs. Host code.
#pragma once

#include <cstdint>
#include <optional>

#include "attn/device.h"
#include "attn/problem.h"
#include "fused/fused_kernels.h"

namespace attn {

// Forces the K/V stages of TMA plans (plan.tma) to `stages`, 2..kSplitKvMaxTmaStages, where a
// block of them fits the device (else the automatic choice stays); std::nullopt, or a number
// outside that range, restores the automatic choice. ATTN_SPLIT_KV_STAGES sets it at start-up.
// For measurements (how deep the H200's loads must go) and the tests of those depths.
void SetSplitKvStagesOverride(std::optional<int> stages);

// Whether the kernel's blocks for `p` fit `device`'s shared memory (not H = 256 on an L4).
bool SplitKvFitsDevice(const AttentionProblem& p, const DeviceInfo& device);

// The plan for `p` on `device` (its SMs and shared memory; SplitKvFitsDevice must hold): the
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

}  // namespace attn
