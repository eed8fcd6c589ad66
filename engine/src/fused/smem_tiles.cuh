// Shared-memory tiles and the copies that fill them (cp.async, 16 bytes a copy): padded rows for
// the mma.sync and split-KV kernels, the 128-byte swizzle that wgmma and TMA read and write.
#pragma once

#include <cstdint>

#include "fused/ptx.cuh"

namespace attn::fused {

// Byte offset of (row, 16-byte chunk) in a tile of kRows rows stored as wgmma and TMA's 128-byte
// swizzle lays it out: 64-column regions of kRows 128-byte rows, the 16-byte chunks of row r
// XOR-permuted by r % 8 (conflict-free ldmatrix without padding).
template <int kRows>
__device__ __forceinline__ uint32_t SwizzledOffset(int row, int chunk) {
  return (chunk / 8) * (kRows * 128) + row * 128 + (((chunk % 8) ^ (row % 8)) * 16);
}

// The dynamic shared memory's start rounded up to the 128-byte swizzle atom's 1024-byte alignment
// (the kernels ask for 1 KiB more than their tiles take).
__device__ __forceinline__ uint32_t SwizzleAlignedBase(const void* smem) {
  return (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
}

// Copies kRows rows of kChunks 16-byte chunks (row stride `stride` elements) with kThreads
// threads, chunk (r, c) to the shared-memory address dst(r, c); rows >= valid_rows are
// zero-filled (tails of T and S). Where a step of the threads covers whole rows, each thread
// copies one chunk column through one pointer advanced by a constant: fewer registers than an
// address per chunk, which the kernels feel (mma.sync H = 128 +1.6 to 3.4%: NOTES.md, "Call 4
// (H200, ...): the same load change in the mma.sync kernel").
template <int kThreads, int kChunks, int kRows, typename T, typename Dst>
__device__ __forceinline__ void CopyRows(const T* gmem, int64_t stride, int valid_rows, int tid,
                                         Dst dst) {
  constexpr int kPerThread = kRows * kChunks / kThreads;
  static_assert(kRows * kChunks % kThreads == 0, "every thread copies the same number of chunks");
  if constexpr (kThreads % kChunks == 0) {
    constexpr int kRowsPerStep = kThreads / kChunks;
    const int r0 = tid / kChunks, c = tid % kChunks;
    const T* first = gmem + c * 8;
    const T* src = first + r0 * stride;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int r = r0 + i * kRowsPerStep;
      const bool valid = r < valid_rows;
      // A zero-filled chunk still names a valid address (the tile's first row).
      CpAsync16(dst(r, c), valid ? src : first, valid);
      src += kRowsPerStep * stride;
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int chunk = tid + i * kThreads;
      const int r = chunk / kChunks, c = chunk % kChunks;
      const bool valid = r < valid_rows;
      CpAsync16(dst(r, c), gmem + (valid ? r * stride : 0) + c * 8, valid);
    }
  }
}

// Copies kRows rows into padded shared memory at `smem` (rows of Traits::kRowElems).
template <typename Traits, int kRows, typename T>
__device__ __forceinline__ void LoadTile(T* smem, const T* gmem, int64_t stride, int valid_rows,
                                         int tid) {
  CopyRows<Traits::kThreads, Traits::kChunks, kRows>(
      gmem, stride, valid_rows, tid, [&](int r, int c) {
        return static_cast<uint32_t>(
            __cvta_generic_to_shared(smem + r * Traits::kRowElems + c * 8));
      });
}

}  // namespace attn::fused
