// Which work a block of the one-block-per-query-tile grids (mma.sync, wgmma, float32) owns and
// where its operands are: the query tile, head and batch element from the block's index, the
// (batch, head)'s Q, K and V (GQA/MQA: the K/V head it reads, without copies), the keys it
// streams; LaunchTiles, the host side of that grid.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fused/fused_kernels.h"
#include "visible_keys.h"

namespace attn::fused {

// Keys of batch element `batch` (visible_keys.h's ClampedKvLen: the kernels never trust lengths
// in device memory).
__device__ __forceinline__ int KvLength(const FusedParams& p, int batch) {
  return static_cast<int>(ClampedKvLen(p.kv_lens, batch, p.kv_len));
}

// A (batch, head)'s slices of Q, K and V at row 0: query head `head`, and the K/V head it reads
// (GQA/MQA: head / group), without copies.
template <typename T>
struct HeadSlices {
  const T* q;
  const T* k;
  const T* v;
};
template <typename T>
__device__ __forceinline__ HeadSlices<T> SliceHead(const FusedParams& p, int batch, int head) {
  const int kv_head = head / p.group;
  return {static_cast<const T*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride,
          static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride,
          static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride};
}

// The query tile a tensor-core block owns, one block per (tile, head, batch): tiles run in
// reverse, so the longest causal ones (the most key tiles) go first and the last wave is short.
// q points at the tile's first row; n_tiles counts its kBlockN-key tiles up to the causal limit.
template <typename T>
struct QueryTile {
  int q0, n_tiles;
  int kv_len;  // this batch element's keys (KvLength)
  const T* q;
  const T* k;
  const T* v;
};
// The kBlockN-key tiles the query tile from row q0 streams: all kv_len keys, or (causal) those
// up to its last row.
template <int kBlockM, int kBlockN>
__device__ __forceinline__ int KeyTiles(const FusedParams& p, int q0, int kv_len) {
  const int kv_end = p.causal ? min(kv_len, q0 + kBlockM) : kv_len;
  return (kv_end + kBlockN - 1) / kBlockN;
}
template <typename T, int kBlockM, int kBlockN>
__device__ __forceinline__ QueryTile<T> TileOfBlock(const FusedParams& p) {
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kBlockM;
  const HeadSlices<T> in = SliceHead<T>(p, blockIdx.z, blockIdx.y);
  const int kv_len = KvLength(p, blockIdx.z);
  return {q0,  KeyTiles<kBlockM, kBlockN>(p, q0, kv_len), kv_len, in.q + q0 * p.q_row_stride, in.k,
          in.v};
}

// Launches one block of `threads` per (tile of `rows` query rows, head, batch) with `smem_bytes`
// of dynamic shared memory (past 48 KiB a kernel must ask for it first).
inline cudaError_t LaunchTiles(void (*kernel)(const FusedParams), int rows, int threads,
                               int smem_bytes, const FusedParams& p, cudaStream_t stream) {
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid((p.q_len + rows - 1) / rows, p.heads, p.batch);
  kernel<<<grid, threads, smem_bytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace attn::fused
