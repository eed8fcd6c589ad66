// The warp-specialised kernel's item order (engine/src/fused/ws_schedule.h): host and device run
// the same functions, so these run on any machine.
#include "fused/ws_schedule.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "fused/heuristics.h"
#include "gtest/gtest.h"

namespace attn::fused {
namespace {

struct Case {
  int64_t pairs, m_blocks;
  int sms;
};

// Every item is one (pair, rank) and every (pair, rank) one item, each group's items on its own
// pairs, and within a group ranks never go back (longest first when causal).
void ExpectAnOrderOfEveryItem(int64_t pairs, int64_t m_blocks, int head_group) {
  SCOPED_TRACE(::testing::Message()
               << pairs << " pairs, " << m_blocks << " query tiles, groups of " << head_group);
  const int64_t groups = pairs / head_group > 1 ? pairs / head_group : 1;
  std::set<std::pair<int64_t, int64_t>> seen;
  int64_t last_rank = -1, last_group = -1;
  for (int64_t w = 0; w < pairs * m_blocks; ++w) {
    const WsItemPosition at = WsItemPositionAt(w, m_blocks, pairs, head_group);
    ASSERT_GE(at.head_batch, 0);
    ASSERT_LT(at.head_batch, pairs);
    ASSERT_GE(at.rank, 0);
    ASSERT_LT(at.rank, m_blocks);
    ASSERT_TRUE(seen.insert({at.head_batch, at.rank}).second) << "item " << w << " repeats one";
    const int64_t group = std::min(at.head_batch / head_group, groups - 1);
    ASSERT_GE(group, last_group) << "item " << w << " goes back a group";
    if (group == last_group) {
      ASSERT_GE(at.rank, last_rank) << "item " << w << " goes back a rank";
    }
    last_group = group;
    last_rank = at.rank;
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), pairs * m_blocks);
}

TEST(WsSchedule, OnePairAGroupIsTheGridsOrder) {
  for (int64_t w = 0; w < 5 * 7; ++w) {
    const WsItemPosition at = WsItemPositionAt(w, 7, 5, 1);
    EXPECT_EQ(at.head_batch, w / 7);
    EXPECT_EQ(at.rank, w % 7);
  }
}

TEST(WsSchedule, EveryItemOnceAndLongestFirstInEachGroup) {
  for (const Case c : {Case{64, 32, 132}, Case{64, 64, 132}, Case{81, 8, 132}, Case{128, 16, 132},
                       Case{3, 40, 132}, Case{1000, 1, 132}, Case{7, 3, 4}, Case{51, 8, 58}}) {
    const int g = WsHeadGroup(true, c.pairs, c.m_blocks, c.sms);
    ExpectAnOrderOfEveryItem(c.pairs, c.m_blocks, g);
  }
  for (int g : {1, 2, 5, 16, 64}) ExpectAnOrderOfEveryItem(64, 12, g);
}

TEST(WsSchedule, CausalGroupsHoldTwoItemsAnSmAndTheLastTakesTheRest) {
  // B4 N16 T4096 (32 query tiles) on 132 SMs: 9 pairs a group (>= 264 items), 7 groups, the last
  // of 10 pairs. T8192: 5 pairs (the last of 9). GQA B4 N32 T2048: 17 pairs would do, 7 groups of
  // 18 share the 128 (the last of 20).
  EXPECT_EQ(WsHeadGroup(true, 64, 32, 132), 9);
  EXPECT_EQ(WsHeadGroup(true, 64, 64, 132), 5);
  EXPECT_EQ(WsHeadGroup(true, 128, 16, 132), 18);
  for (const Case c : {Case{64, 32, 132}, Case{64, 64, 132}, Case{128, 16, 132}, Case{81, 8, 132},
                       Case{500, 3, 132}, Case{2, 100, 132}}) {
    const int g = WsHeadGroup(true, c.pairs, c.m_blocks, c.sms);
    ASSERT_GE(g, 1);
    ASSERT_LE(g, c.pairs);
    const int64_t last = c.pairs - (c.pairs / g - 1) * g;  // the last group's pairs
    EXPECT_GE(last, g) << c.pairs << " pairs in groups of " << g;
    EXPECT_LT(last, 2 * g) << c.pairs << " pairs in groups of " << g;
    if (g < c.pairs) {
      EXPECT_GE(g * c.m_blocks, 2 * c.sms) << "a group of fewer than two items an SM";
    }
  }
}

TEST(WsSchedule, AlikeItemsAndOnePairKeepTheGridsOrder) {
  EXPECT_EQ(WsHeadGroup(false, 64, 32, 132), 1);  // non-causal: every item has every key
  EXPECT_EQ(WsHeadGroup(true, 1, 32, 132), 1);
  EXPECT_EQ(WsHeadGroup(true, 64, 32, 0), 1);  // no SM count: one SM's two items, one pair
}

}  // namespace
}  // namespace attn::fused
