// A memory arena: one allocation made at start-up, carved into blocks per request.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "attn/tensor.h"

namespace attn {

class Arena;

// A block of an Arena, returned to it when destroyed. Move-only.
class ArenaBlock {
 public:
  ArenaBlock() = default;
  ArenaBlock(ArenaBlock&& other) noexcept;
  ArenaBlock& operator=(ArenaBlock&& other) noexcept;
  ArenaBlock(const ArenaBlock&) = delete;
  ArenaBlock& operator=(const ArenaBlock&) = delete;
  ~ArenaBlock();

  void* data() const { return data_; }
  int64_t size() const {
    return size_;
  }  // the bytes asked for; the arena reserves a multiple
     // of kAlignment behind them

 private:
  friend class Arena;
  ArenaBlock(Arena* arena, void* data, int64_t offset, int64_t size, int64_t reserved)
      : arena_(arena), data_(data), offset_(offset), size_(size), reserved_(reserved) {}
  void Release();

  Arena* arena_ = nullptr;
  void* data_ = nullptr;
  int64_t offset_ = 0;
  int64_t size_ = 0;
  int64_t reserved_ = 0;
};

// First-fit allocator over one buffer of host or device memory. Thread-safe. Never grows: a
// request that does not fit is ResourceExhausted with the bytes needed and the largest free block,
// so callers can refuse work instead of failing mid-launch.
class Arena {
 public:
  static constexpr int64_t kAlignment = 256;  // cudaMalloc's alignment; enough for any vector load

  // Allocates `bytes` of `memory` once: cudaMalloc for kDevice, aligned new for kHost.
  static absl::StatusOr<std::unique_ptr<Arena>> Create(MemoryKind memory, int64_t bytes);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // A block of `bytes` (kAlignment bytes aligned; the arena reserves `bytes` rounded up to a
  // multiple of kAlignment). Zero bytes gives an empty block.
  absl::StatusOr<ArenaBlock> Allocate(int64_t bytes);

  MemoryKind memory() const { return memory_; }
  int64_t capacity() const { return capacity_; }
  int64_t bytes_in_use() const;
  int64_t peak_bytes_in_use() const;
  void ResetPeak();
  int64_t largest_free_block() const;

 private:
  friend class ArenaBlock;
  Arena(MemoryKind memory, void* base, int64_t capacity);
  void Free(int64_t offset, int64_t size);

  const MemoryKind memory_;
  void* const base_;
  const int64_t capacity_;
  mutable std::mutex mu_;
  std::map<int64_t, int64_t> free_;  // offset -> size, coalesced
  int64_t in_use_ = 0;
  int64_t peak_ = 0;
};

}  // namespace attn
