// The order in which the warp-specialised kernel's persistent blocks take work items
// (fused_wgmma_ws.cuh): plain types and ATTN_HOST_DEVICE, so the kernel and the host's tests
// (tests/engine/ws_schedule_test.cc) run the same code.
//
// An item is one 128-row query tile of one (head, batch) pair. Items go out in groups of
// `head_group` pairs (the last group takes the rest, fewer than twice as many), within a group
// rank-major: every pair's last query tile (rank 0: the most keys when causal), then every pair's
// one before, and so on. With one pair a group that is the one-block-per-tile grid's order.
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
// group is one pair (non-causal; H64 B16 T256 took 3% longer with the general path, H100).
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

// (head, batch) pairs a group: one where the items are alike (not causal). Causal items run from
// 1 to m_blocks K/V tiles; a group of at least two items an SM has its longest items claimed early
// enough to end with the rest (their mean is half the longest), and the last group, taking the
// remainder, is no smaller (a smaller one cost H64 T8192 causal 4% on the H100: its longest items
// were claimed too late again). Between 1 and `pairs`.
inline int WsHeadGroup(bool causal, int64_t pairs, int64_t m_blocks, int multiprocessors) {
  if (!causal || pairs <= 1 || m_blocks < 1) return 1;
  const int64_t sms = multiprocessors > 1 ? multiprocessors : 1;
  const int64_t enough = (2 * sms + m_blocks - 1) / m_blocks;
  const int64_t want = enough < pairs ? enough : pairs;
  return static_cast<int>(pairs / (pairs / want));
}

}  // namespace attn::fused
