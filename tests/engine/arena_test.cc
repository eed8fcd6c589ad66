#include "attn/arena.h"

#include <vector>

#include "gtest/gtest.h"

namespace attn {
namespace {

TEST(Arena, AllocatesAlignedBlocksAndReturnsThem) {
  auto arena = Arena::Create(MemoryKind::kHost, 4096).value();
  {
    auto a = arena->Allocate(1).value();
    auto b = arena->Allocate(300).value();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % Arena::kAlignment, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % Arena::kAlignment, 0u);
    EXPECT_EQ(a.size(), 1);    // what was asked for; 256 reserved
    EXPECT_EQ(b.size(), 300);  // 512 reserved
    EXPECT_EQ(arena->bytes_in_use(), 768);
  }
  EXPECT_EQ(arena->bytes_in_use(), 0);
  EXPECT_EQ(arena->peak_bytes_in_use(), 768);
  EXPECT_EQ(arena->largest_free_block(), 4096);  // coalesced back into one block
}

TEST(Arena, RefusesWhatDoesNotFitWithTheNumbers) {
  auto arena = Arena::Create(MemoryKind::kHost, 1024).value();
  auto too_big = arena->Allocate(2048);
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(too_big.status().message(),
            "arena: 2048 bytes needed but the arena holds only 1024; raise the arena size or "
            "shrink the problem");
  auto a = arena->Allocate(512).value();
  auto b = arena->Allocate(512).value();
  auto c = arena->Allocate(256);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("1024 of 1024 in use, largest free block 0"),
            absl::string_view::npos);
  EXPECT_EQ(arena->Allocate(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Arena, ReusesFreedHolesFirstFit) {
  auto arena = Arena::Create(MemoryKind::kHost, 1024).value();
  auto a = arena->Allocate(256).value();
  auto b = arena->Allocate(256).value();
  auto c = arena->Allocate(256).value();
  void* hole = b.data();
  b = ArenaBlock();  // frees the middle block
  auto d = arena->Allocate(200).value();
  EXPECT_EQ(d.data(), hole);
  EXPECT_EQ(arena->bytes_in_use(), 768);
}

TEST(Arena, MovedBlocksAreReleasedOnce) {
  auto arena = Arena::Create(MemoryKind::kHost, 1024).value();
  std::vector<ArenaBlock> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(arena->Allocate(256).value());
  EXPECT_EQ(arena->bytes_in_use(), 1024);
  blocks.clear();
  EXPECT_EQ(arena->bytes_in_use(), 0);
  EXPECT_EQ(arena->largest_free_block(), 1024);
}

TEST(Arena, ZeroByteAllocationIsEmpty) {
  auto arena = Arena::Create(MemoryKind::kHost, 256).value();
  auto empty = arena->Allocate(0).value();
  EXPECT_EQ(empty.size(), 0);
  EXPECT_EQ(arena->bytes_in_use(), 0);
}

}  // namespace
}  // namespace attn
