#include "attn/arena.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"
#include "raw_memory.h"

namespace attn {

ArenaBlock::ArenaBlock(ArenaBlock&& other) noexcept
    : arena_(other.arena_),
      data_(other.data_),
      offset_(other.offset_),
      size_(other.size_),
      reserved_(other.reserved_) {
  other.arena_ = nullptr;
}

ArenaBlock& ArenaBlock::operator=(ArenaBlock&& other) noexcept {
  if (this != &other) {
    Release();
    arena_ = other.arena_;
    data_ = other.data_;
    offset_ = other.offset_;
    size_ = other.size_;
    reserved_ = other.reserved_;
    other.arena_ = nullptr;
  }
  return *this;
}

ArenaBlock::~ArenaBlock() { Release(); }

void ArenaBlock::Release() {
  if (arena_ != nullptr && reserved_ > 0) arena_->Free(offset_, reserved_);
  arena_ = nullptr;
}

absl::StatusOr<std::unique_ptr<Arena>> Arena::Create(MemoryKind memory, int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("arena_bytes: must be >= 0, got %d", bytes));
  }
  bytes = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* base = nullptr;
  if (bytes > 0) {
    absl::StatusOr<void*> raw =
        memory == MemoryKind::kDevice ? AllocateDeviceMemory(bytes) : AllocateHostMemory(bytes);
    if (!raw.ok()) return raw.status();
    base = *raw;
    // Host memory is committed now, as device memory is by its allocation: the server's resident
    // memory is its arena from start-up, not a figure that grows as requests first touch pages.
    if (memory == MemoryKind::kHost) std::memset(base, 0, static_cast<size_t>(bytes));
  }
  return std::unique_ptr<Arena>(new Arena(memory, base, bytes));
}

Arena::Arena(MemoryKind memory, void* base, int64_t capacity)
    : memory_(memory), base_(base), capacity_(capacity) {
  if (capacity > 0) free_[0] = capacity;
}

Arena::~Arena() {
  if (base_ == nullptr) return;
  if (memory_ == MemoryKind::kDevice) {
    FreeDeviceMemory(base_);
  } else {
    FreeHostMemory(base_);
  }
}

absl::StatusOr<ArenaBlock> Arena::Allocate(int64_t bytes) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocation of %d bytes: must be >= 0", bytes));
  }
  if (bytes == 0) return ArenaBlock();
  if (bytes > capacity_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "arena: %d bytes needed but the arena holds only %d; raise the arena size or shrink the "
        "problem",
        bytes, capacity_));
  }
  const int64_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const int64_t offset = it->first;
    const int64_t remaining = it->second - size;
    free_.erase(it);
    if (remaining > 0) free_[offset + size] = remaining;
    in_use_ += size;
    peak_ = std::max(peak_, in_use_);
    return ArenaBlock(this, static_cast<char*>(base_) + offset, offset, bytes, size);
  }
  int64_t largest = 0;
  for (const auto& [offset, free_size] : free_) largest = std::max(largest, free_size);
  return absl::ResourceExhaustedError(absl::StrFormat(
      "arena: %d bytes needed, %d of %d in use, largest free block %d; retry when running work "
      "finishes or raise the arena size",
      size, in_use_, capacity_, largest));
}

void Arena::Free(int64_t offset, int64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= size;
  auto [it, inserted] = free_.emplace(offset, size);
  // Coalesce with the following and the preceding free block.
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

int64_t Arena::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t Arena::peak_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

void Arena::ResetPeak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = in_use_;
}

int64_t Arena::largest_free_block() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

}  // namespace attn
