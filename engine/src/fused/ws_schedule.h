// The order in which the warp-specialised kernel's persistent blocks take work items
// (wgmma_ws_kernel.cuh): plain types and ATTN_HOST_DEVICE, so the kernel and the host's tests
// (tests/engine/ws_schedule_test.cc) run the same code.
//
// An item is one 128-row query tile of one (head, batch) pair. Items go out in groups of
// `head_group` pairs (heuristics.h's WsHeadGroup) (the last group takes the rest, fewer than twice
// as many), within a group rank-major: every pair's last query tile (rank 0: the most keys when
// causal), then every pair's one before, and so on. With one pair a group that is the
// one-block-per-tile grid's order.
#pragma once

#include <cstdint>

#include "host_device.h"

namespace attn::fused {

// Item w's pair (head_batch = batch * heads + head) and rank (its query tile is the pair's
// m_blocks - 1 - rank'th).
struct WsItemPosition {
  int64_t head_batch;
  int64_t rank;
};

// 64-bit divisions are long instruction sequences, run for every item by the producer and every
// consumer thread: one quotient, remainders by multiplication, and the plain order's two where a
// group is one pair (non-causal; H64 B16 T256 took 3% longer with the general path: NOTES.md,
// "Causal items in groups of heads, longest first").
ATTN_HOST_DEVICE inline WsItemPosition WsItemPositionAt(int64_t w, int64_t m_blocks, int64_t pairs,
                                                        int head_group) {
  WsItemPosition at;
  if (head_group == 1) {
    at.head_batch = w / m_blocks;
    at.rank = w - at.head_batch * m_blocks;
    return at;
  }
  const int64_t group_items = head_group * m_blocks;
  const int64_t whole = pairs / head_group, groups = whole > 1 ? whole : 1;
  const int64_t quotient = w / group_items;
  const int64_t group = quotient < groups - 1 ? quotient : groups - 1;
  const int64_t in_group = w - group * group_items;
  const int64_t group_pairs = group == groups - 1 ? pairs - group * head_group : head_group;
  at.rank = in_group / group_pairs;
  at.head_batch = group * head_group + (in_group - at.rank * group_pairs);
  return at;
}

}  // namespace attn::fused
