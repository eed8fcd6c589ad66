// The `fused` flash-attention forward kernels (FlashAttention-2's algorithm) for sm_80 and newer,
// included through fused_launch.cuh by the per-head-dim fused_hdim<H>.cu files.
//
// Tensor-core kernel (bf16/fp16), one block per (query tile, head, batch):
//  - the block's kBlockM query rows are copied to shared memory once (cp.async);
//  - K/V tiles of kBlockN keys stream through two shared-memory buffers: tile j + 1 is in
//    flight (cp.async) while tile j is computed, one barrier per tile;
//  - each warp owns kMAtoms 16-row slices of the query tile; S = Q K^T (mma.sync m16n8k16,
//    ldmatrix for Q and K) stays in registers, the online softmax keeps the running max and sum
//    in fp32 (ex2.approx on log2(e)-prescaled scores; the max moves, and O is rescaled, only
//    when a tile's max exceeds it by more than 2^8), P is narrowed to the input type in registers
//    and O += P V (ldmatrix.trans for V) accumulates in fp32;
//  - causal: key tiles wholly above the diagonal are never loaded; only tiles that cross the
//    diagonal or the end of S are masked;
//  - the output is normalised and written once.
// Shared-memory rows are padded by one 16-byte chunk: eight consecutive rows then start in
// eight different bank groups for every head dim (H = 96 has 12 chunks per row, which an XOR
// swizzle over 8 chunks cannot cover), so ldmatrix and the cp.async stores are conflict-free.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "fused/fused_kernels.h"
#include "visible_keys.h"

namespace attn::fused {

// ---------------------------------------------------------------------------------------------
// PTX wrappers (sm_80+).

// `dst` is a shared-memory address (as __cvta_generic_to_shared gives).
__device__ __forceinline__ void CpAsync16(uint32_t dst, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;  // 0: fill the 16 bytes with zeros, read nothing
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(src_bytes));
}
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  CpAsync16(static_cast<uint32_t>(__cvta_generic_to_shared(smem)), gmem, valid);
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], const void* smem) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Byte offset of (row, 16-byte chunk) in a tile of kRows rows stored as wgmma and TMA's 128-byte
// swizzle lays it out: 64-column regions of kRows 128-byte rows, the 16-byte chunks of row r
// XOR-permuted by r % 8 (conflict-free ldmatrix without padding).
template <int kRows>
__device__ __forceinline__ uint32_t SwizzledOffset(int row, int chunk) {
  return (chunk / 8) * (kRows * 128) + row * 128 + (((chunk % 8) ^ (row % 8)) * 16);
}

// 2^x on the special-function unit (flush-to-zero; about 2 ulp), as FlashAttention-2 gets with
// --use_fast_math. The half kernel's probabilities are rounded to 8 or 11 bits right after.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The half kernel moves a row's running max only when a tile's max exceeds it by more than this
// many powers of two (FlashAttention-4's conditional rescale), so probabilities stay <= 2^8:
// exact in fp32 sums, and bf16/fp16 keep their relative precision at any magnitude.
constexpr float kLazyRescaleLog2 = 8.0f;

template <typename T>
struct HalfOps;

template <>
struct HalfOps<__nv_bfloat16> {
  __device__ __forceinline__ static void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t Pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

template <>
struct HalfOps<__half> {
  __device__ __forceinline__ static void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t Pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
};

// ---------------------------------------------------------------------------------------------
// The pieces every tensor-core kernel shares (mma.sync, wgmma, split-KV), written once. They work
// on one thread's share of a 16-row slice in the m16n8 accumulator layout: per n8 column block
// four values, rows g = lane / 4 (elements 0, 1) and g + 8 (elements 2, 3), columns 2 * (lane %
// 4) + {0, 1}. wgmma's accumulator is the same layout per warp.

// Keys of batch element `batch` (visible_keys.h's ClampedKvLen: the kernels never trust lengths
// in device memory).
__device__ __forceinline__ int KvLength(const FusedParams& p, int batch) {
  return static_cast<int>(ClampedKvLen(p.kv_lens, batch, p.kv_len));
}

// -inf for the scores of keys at or past `key_end` and (causal, top-left) keys after the
// thread's query rows t[0] (row g) and t[1] (row g + 8). `key0` is the first key of s's column 0.
template <int kNBlocks>
__device__ __forceinline__ void MaskScores(float (&s)[kNBlocks][4], int key0, const int (&t)[2],
                                           int key_end, bool causal) {
  const int col = 2 * (threadIdx.x % 4);
#pragma unroll
  for (int nb = 0; nb < kNBlocks; ++nb)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = key0 + nb * 8 + col + (e % 2);
      if (key >= key_end || (causal && key > t[e / 2])) s[nb][e] = -INFINITY;
    }
}

// One thread's running softmax state for its two rows of a slice: the max of the raw scores and
// the sum of this thread's probabilities (its columns only: QuadSum completes it).
struct RowSoftmax {
  float max[2] = {-INFINITY, -INFINITY};
  float sum[2] = {0.f, 0.f};
};

// The online softmax of one tile with the lazy rescale: turns the scores s into probabilities in
// place and sets alpha, the factor O's rows must be scaled by. The running max moves (alpha < 1)
// only when a tile's max exceeds it by more than kLazyRescaleLog2 in log2 units; otherwise the
// stale max stays and P = exp2(S * scale * log2e - max * scale * log2e) <= 2^kLazyRescaleLog2. O
// and the sum share that max, so the final O / sum is the same softmax. Returns whether a row of
// this thread moved (the caller skips the rescale of O unless one in its warp did, which after
// the first tiles is rare).
template <int kNBlocks>
__device__ __forceinline__ bool OnlineSoftmax(float (&s)[kNBlocks][4], RowSoftmax& state,
                                              float scale_log2, float (&alpha)[2]) {
  bool moved = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb) mx = fmaxf(mx, fmaxf(s[nb][2 * h], s[nb][2 * h + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // The old tiles' probabilities were taken relative to the rounded product
    // __fmul_rn(old max, scale_log2); alpha must use that same value (an FMA here would use the
    // exact product and bias every rescale by up to half an ulp of max * scale_log2). A row with
    // no visible key yet keeps max -inf (-inf - -inf is NaN: no move).
    const float old_scaled = __fmul_rn(state.max[h], scale_log2);
    const float tile_scaled = __fmul_rn(mx, scale_log2);
    alpha[h] = 1.f;
    if (tile_scaled - old_scaled > kLazyRescaleLog2) {
      alpha[h] = FastExp2(old_scaled - tile_scaled);
      state.max[h] = mx;
      moved = true;
    }
    // Subtract 0 for a row whose max is still -inf, so exp2 gives 0, not NaN.
    const float max_scaled = state.max[h] == -INFINITY ? 0.f : __fmul_rn(state.max[h], scale_log2);
    float sum = 0.f;
#pragma unroll
    for (int nb = 0; nb < kNBlocks; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pr = FastExp2(fmaf(s[nb][2 * h + e], scale_log2, -max_scaled));
        s[nb][2 * h + e] = pr;
        sum += pr;
      }
    state.sum[h] = state.sum[h] * alpha[h] + sum;
  }
  return moved;
}

// O's rows times alpha (OnlineSoftmax's factors).
template <int kDBlocks>
__device__ __forceinline__ void RescaleRows(float (&o)[kDBlocks][4], const float (&alpha)[2]) {
#pragma unroll
  for (int d = 0; d < kDBlocks; ++d) {
    o[d][0] *= alpha[0];
    o[d][1] *= alpha[0];
    o[d][2] *= alpha[1];
    o[d][3] *= alpha[1];
  }
}

// A row's value summed over the four threads of its quad.
__device__ __forceinline__ float QuadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// The epilogue: row h of the thread's pair, O / sum (sum: the quad's total; 0 for a row that saw
// no key), narrowed to T at `row` (the output row at this thread's first column).
template <typename T, int kDBlocks>
__device__ __forceinline__ void StoreRow(T* row, const float (&o)[kDBlocks][4], int h, float sum) {
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int d = 0; d < kDBlocks; ++d) {
    *reinterpret_cast<uint32_t*>(row + d * 8) =
        HalfOps<T>::Pack(o[d][2 * h] * inv, o[d][2 * h + 1] * inv);
  }
}

// The epilogue of one 16-row slice: the thread's rows t0 and t0 + 8 (t0: the slice's first row
// + lane / 4) of the head's output `out` (its row 0) at its columns from `col` (2 * (lane % 4)),
// O / sum, rows past T dropped.
template <typename T, int kDBlocks>
__device__ __forceinline__ void StoreSlice(T* out, const FusedParams& p, int t0, int col,
                                           const float (&o)[kDBlocks][4],
                                           const RowSoftmax& softmax) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float sum = QuadSum(softmax.sum[h]);
    const int t = t0 + h * 8;
    if (t < p.q_len) StoreRow(out + static_cast<int64_t>(t) * p.o_row_stride + col, o, h, sum);
  }
}

// ---------------------------------------------------------------------------------------------
// Tile configuration of the tensor-core kernel.

template <int kHeadDim_, int kBlockM_, int kBlockN_, int kWarps_, int kMinBlocksPerSm_>
struct HalfTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = kBlockM_;  // query rows per block
  static constexpr int kBlockN = kBlockN_;  // keys per K/V tile
  static constexpr int kWarps = kWarps_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMAtoms = kBlockM / (16 * kWarps);  // 16-row mma slices per warp
  static constexpr int kNBlocks = kBlockN / 8;             // n8 column blocks of S
  static constexpr int kDBlocks = kHeadDim / 8;            // n8 column blocks of O
  static constexpr int kChunks = kHeadDim / 8;             // 16-byte chunks per row
  static constexpr int kRowElems = kHeadDim + 8;           // padded shared-memory row
  static constexpr int kQElems = kBlockM * kRowElems;
  static constexpr int kKvElems = kBlockN * kRowElems;
  static constexpr int kSmemBytes = (kQElems + 4 * kKvElems) * 2;  // Q, 2 x K, 2 x V
  static_assert(kHeadDim % 16 == 0, "head dim must be a multiple of the mma k (16)");
  static_assert(kBlockM % (16 * kWarps) == 0, "each warp owns whole 16-row mma slices");
  static_assert(kBlockN % 16 == 0, "P V consumes keys 16 at a time");
  static_assert(kNBlocks % 2 == 0 && kDBlocks % 2 == 0, "ldmatrix.x4 loads n8 blocks in pairs");
  static_assert(kBlockM * kChunks % kThreads == 0 && kBlockN * kChunks % kThreads == 0,
                "every thread copies the same number of 16-byte chunks");
  static_assert(kMinBlocksPerSm * kSmemBytes <= 227 * 1024, "shared memory of the resident blocks");
};

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

// Copies kRows rows of kChunks 16-byte chunks (row stride `stride` elements) with kThreads
// threads, chunk (r, c) to the shared-memory address dst(r, c); rows >= valid_rows are
// zero-filled (tails of T and S). Where a step of the threads covers whole rows, each thread
// copies one chunk column through one pointer advanced by a constant: fewer registers than an
// address per chunk, which the kernels feel (NOTES.md, calls 3 and 4).
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

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    FusedHalfKernel(const FusedParams p) {
  using Ops = HalfOps<T>;
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN;
  constexpr int kMAtoms = Traits::kMAtoms, kNBlocks = Traits::kNBlocks;
  constexpr int kDBlocks = Traits::kDBlocks, kRowElems = Traits::kRowElems;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);
  T* const s_k = s_q + Traits::kQElems;
  T* const s_v = s_k + 2 * Traits::kKvElems;

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const QueryTile<T> tile = TileOfBlock<T, kBlockM, kBlockN>(p);
  const int q0 = tile.q0, n_tiles = tile.n_tiles, kv_len = tile.kv_len;
  const T *q = tile.q, *k = tile.k, *v = tile.v;

  // Q joins the first commit group below.
  LoadTile<Traits, kBlockM>(s_q, q, p.q_row_stride, min(kBlockM, p.q_len - q0), tid);

  float o[kMAtoms][kDBlocks][4];
  RowSoftmax softmax[kMAtoms];  // rows g and g + 8 of each slice
#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
    for (int d = 0; d < kDBlocks; ++d) o[ma][d][0] = o[ma][d][1] = o[ma][d][2] = o[ma][d][3] = 0.f;

  const int warp_row0 = warp * kMAtoms * 16;
  const int quad_row = lane / 4, quad_col = 2 * (lane % 4);
  // ldmatrix row addresses: A (Q) rows lane % 16 at k chunk lane / 16; B (K) keys lane % 8 +
  // 8 * (lane / 16) at k chunk (lane / 8) % 2; B (V, transposed) keys lane % 8 + 8 * ((lane / 8) %
  // 2) at d chunk lane / 16.
  const int a_row = lane % 16, a_col = (lane / 16) * 8;
  const int k_row = lane % 8 + 8 * (lane / 16), k_col = ((lane / 8) % 2) * 8;
  const int v_row = lane % 8 + 8 * ((lane / 8) % 2), v_col = (lane / 16) * 8;

  // S = Q K^T for this warp's rows, from the K tile at `ck`.
  auto compute_scores = [&](float(&s)[kMAtoms][kNBlocks][4], const T* ck) {
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma)
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb)
        s[ma][nb][0] = s[ma][nb][1] = s[ma][nb][2] = s[ma][nb][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < Traits::kHeadDim / 16; ++ks) {
      uint32_t a[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        LdMatrixX4(a[ma], s_q + (warp_row0 + ma * 16 + a_row) * kRowElems + ks * 16 + a_col);
      }
#pragma unroll
      for (int nb = 0; nb < kNBlocks; nb += 2) {
        uint32_t b[4];
        LdMatrixX4(b, ck + (nb * 8 + k_row) * kRowElems + ks * 16 + k_col);
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          Ops::Mma(s[ma][nb], a[ma], b[0], b[1]);
          Ops::Mma(s[ma][nb + 1], a[ma], b[2], b[3]);
        }
      }
    }
  };

  // Masks tile `key0`'s scores, updates the online softmax and accumulates O += P V from `cv`.
  auto softmax_and_pv = [&](float(&s)[kMAtoms][kNBlocks][4], const T* cv, int key0) {
    // Mask keys past S, and (causal) keys after the query, only in tiles that have any.
    if (key0 + kBlockN > kv_len || (p.causal && key0 + kBlockN - 1 > q0)) {
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        const int t0 = q0 + warp_row0 + ma * 16 + quad_row;
        MaskScores(s[ma], key0, {t0, t0 + 8}, kv_len, p.causal);
      }
    }
    float alpha[kMAtoms][2];
    bool moved = false;
#pragma unroll
    for (int ma = 0; ma < kMAtoms; ++ma)
      moved |= OnlineSoftmax(s[ma], softmax[ma], p.scale_log2, alpha[ma]);
    if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) RescaleRows(o[ma], alpha[ma]);
    }

    // O += P V: P's accumulator layout is the A-fragment layout of the next mma.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t pa[kMAtoms][4];
#pragma unroll
      for (int ma = 0; ma < kMAtoms; ++ma) {
        pa[ma][0] = Ops::Pack(s[ma][2 * kk][0], s[ma][2 * kk][1]);
        pa[ma][1] = Ops::Pack(s[ma][2 * kk][2], s[ma][2 * kk][3]);
        pa[ma][2] = Ops::Pack(s[ma][2 * kk + 1][0], s[ma][2 * kk + 1][1]);
        pa[ma][3] = Ops::Pack(s[ma][2 * kk + 1][2], s[ma][2 * kk + 1][3]);
      }
#pragma unroll
      for (int d = 0; d < kDBlocks; d += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, cv + (kk * 16 + v_row) * kRowElems + d * 8 + v_col);
#pragma unroll
        for (int ma = 0; ma < kMAtoms; ++ma) {
          Ops::Mma(o[ma][d], pa[ma], b[0], b[1]);
          Ops::Mma(o[ma][d + 1], pa[ma], b[2], b[3]);
        }
      }
    }
  };

  auto load_k = [&](int tile) {
    const int key0 = tile * kBlockN;
    LoadTile<Traits, kBlockN>(s_k + (tile % 2) * Traits::kKvElems, k + key0 * p.k_row_stride,
                              p.k_row_stride, min(kBlockN, kv_len - key0), tid);
  };
  auto load_v = [&](int tile) {
    const int key0 = tile * kBlockN;
    LoadTile<Traits, kBlockN>(s_v + (tile % 2) * Traits::kKvElems, v + key0 * p.v_row_stride,
                              p.v_row_stride, min(kBlockN, kv_len - key0), tid);
  };
  // Tile j + 1 (K and V) is in flight while tile j is computed.
  load_k(0);
  load_v(0);
  CpAsyncCommit();
  for (int j = 0; j < n_tiles; ++j) {
    CpAsyncWait<0>();
    __syncthreads();  // tile j is in; every warp is done with tile j - 1's buffers
    if (j + 1 < n_tiles) {
      load_k(j + 1);
      load_v(j + 1);
    }
    CpAsyncCommit();
    float s[kMAtoms][kNBlocks][4];
    compute_scores(s, s_k + (j % 2) * Traits::kKvElems);
    softmax_and_pv(s, s_v + (j % 2) * Traits::kKvElems, j * kBlockN);
  }
  CpAsyncWait<0>();

  // out = O / sum, written once; rows past T are dropped.
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride;
#pragma unroll
  for (int ma = 0; ma < kMAtoms; ++ma) {
    StoreSlice(out, p, q0 + warp_row0 + ma * 16 + quad_row, quad_col, o[ma], softmax[ma]);
  }
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

template <typename Traits, typename T>
cudaError_t LaunchHalf(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedHalfKernel<Traits, T>, Traits::kBlockM, Traits::kThreads,
                     Traits::kSmemBytes, p, stream);
}

// ---------------------------------------------------------------------------------------------
// float32 kernel on CUDA cores: one warp per query row, kFloatRows rows per block, K/V tiles of
// 32 keys in shared memory (plain loads; any alignment). Lane j scores key j of the tile, the
// warp's online softmax runs once per tile (shuffles), and lane l accumulates output dims
// l, l + 32, ... Exact fp32 FMAs throughout (no TF32), so it matches the naive fp32 path's
// accuracy.

constexpr int kFloatRows = 8;
constexpr int kFloatKeys = 32;

template <int kHeadDim>
struct FloatTraits {
  static constexpr int kKStride = kHeadDim + 4;  // float4 rows; 8 lanes' rows hit 8 bank groups
  static constexpr int kPerLane = kHeadDim / 32;
  static constexpr int kSmemBytes =
      (kFloatKeys * kKStride + kFloatKeys * kHeadDim + kFloatRows * kHeadDim) * 4;
  static_assert(kHeadDim % 32 == 0, "each lane owns kHeadDim / 32 output dims");
};

// (hi, lo) = (hi, lo) * alpha + x, compensated; _rn intrinsics keep nvcc from contracting the
// steps into FMAs, which would break the compensation.
__device__ __forceinline__ void KahanScaleAdd(float& hi, float& lo, float alpha, float x) {
  hi = __fmul_rn(hi, alpha);
  lo = __fmul_rn(lo, alpha);
  const float y = __fsub_rn(x, lo);
  const float t = __fadd_rn(hi, y);
  lo = __fsub_rn(__fsub_rn(t, hi), y);
  hi = t;
}

template <int kHeadDim>
__global__ void __launch_bounds__(kFloatRows * 32) FusedFloatKernel(const FusedParams p) {
  using Traits = FloatTraits<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  float* const s_k = reinterpret_cast<float*>(smem_raw);   // [keys][kKStride]
  float* const s_v = s_k + kFloatKeys * Traits::kKStride;  // [keys][kHeadDim]
  float* const s_q = s_v + kFloatKeys * kHeadDim;          // [rows][kHeadDim]

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int q0 = blockIdx.x * kFloatRows;
  const int t = q0 + warp;
  const HeadSlices<float> in = SliceHead<float>(p, batch, head);
  const float *q = in.q, *k = in.k, *v = in.v;

  for (int i = tid; i < kFloatRows * kHeadDim; i += kFloatRows * 32) {
    const int r = i / kHeadDim, d = i % kHeadDim;
    s_q[i] = q0 + r < p.q_len ? q[(q0 + r) * p.q_row_stride + d] : 0.f;
  }
  const int kv_len = KvLength(p, batch);
  const int kv_end = p.causal ? min(kv_len, q0 + kFloatRows) : kv_len;

  // O and the running sum are compensated (Kahan) sums of per-tile partials: over S = 13000
  // keys a plain running sum lost ~2e-6 relative, 5x the naive path's blocked GEMM.
  float acc[Traits::kPerLane], acc_lo[Traits::kPerLane];
#pragma unroll
  for (int i = 0; i < Traits::kPerLane; ++i) acc[i] = acc_lo[i] = 0.f;
  float row_max = -INFINITY, lane_sum = 0.f, lane_sum_lo = 0.f;

  for (int key0 = 0; key0 < kv_end; key0 += kFloatKeys) {
    __syncthreads();  // the previous tile is consumed (and s_q is written, first time)
    for (int i = tid; i < kFloatKeys * kHeadDim; i += kFloatRows * 32) {
      const int r = i / kHeadDim, d = i % kHeadDim;
      const bool valid = key0 + r < kv_len;
      s_k[r * Traits::kKStride + d] = valid ? k[(key0 + r) * p.k_row_stride + d] : 0.f;
      s_v[i] = valid ? v[(key0 + r) * p.v_row_stride + d] : 0.f;
    }
    __syncthreads();

    const float4* kr = reinterpret_cast<const float4*>(s_k + lane * Traits::kKStride);
    const float4* qr = reinterpret_cast<const float4*>(s_q + warp * kHeadDim);
    float score = 0.f;
#pragma unroll 8
    for (int d = 0; d < kHeadDim / 4; ++d) {
      const float4 a = qr[d], b = kr[d];
      score = fmaf(a.x, b.x, score);
      score = fmaf(a.y, b.y, score);
      score = fmaf(a.z, b.z, score);
      score = fmaf(a.w, b.w, score);
    }
    const int key = key0 + lane;
    if (key >= kv_len || (p.causal && key > t)) score = -INFINITY;

    float mx = score;
#pragma unroll
    for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    mx = fmaxf(mx, row_max);
    // Same rounded products as the half kernel (why: there). Measured by a CPU emulation of this
    // arithmetic at S = 13000: rel L2 9e-6 with an FMA here and plain sums, 2.6e-7 with both fixes.
    const float max_scaled = mx == -INFINITY ? 0.f : __fmul_rn(mx, p.scale_log2);
    const float alpha = exp2f(__fmul_rn(row_max, p.scale_log2) - max_scaled);
    row_max = mx;
    const float pr = exp2f(fmaf(score, p.scale_log2, -max_scaled));
    KahanScaleAdd(lane_sum, lane_sum_lo, alpha, pr);
    float part[Traits::kPerLane];
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) part[i] = 0.f;
#pragma unroll 8
    for (int jk = 0; jk < kFloatKeys; ++jk) {
      const float pj = __shfl_sync(0xffffffffu, pr, jk);
#pragma unroll
      for (int i = 0; i < Traits::kPerLane; ++i)
        part[i] = fmaf(pj, s_v[jk * kHeadDim + lane + 32 * i], part[i]);
    }
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) KahanScaleAdd(acc[i], acc_lo[i], alpha, part[i]);
  }

  float sum = lane_sum - lane_sum_lo;  // lo holds what hi overshot
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (t < p.q_len) {
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    float* out = static_cast<float*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride +
                 static_cast<int64_t>(t) * p.o_row_stride;
#pragma unroll
    for (int i = 0; i < Traits::kPerLane; ++i) out[lane + 32 * i] = (acc[i] - acc_lo[i]) * inv;
  }
}

template <int kHeadDim>
cudaError_t LaunchFloat(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedFloatKernel<kHeadDim>, kFloatRows, kFloatRows * 32,
                     FloatTraits<kHeadDim>::kSmemBytes, p, stream);
}

// The tile choice per head dim (measurements: NOTES.md). 4 warps of 128 threads, two blocks per
// SM (so one block's barrier never idles the SM), up to 255 registers a thread. 128 query rows
// (32 per warp: every K/V fragment read from shared memory feeds two mma row slices); 64-key
// tiles, except 32 for H = 128 (+3-8% on H200 over 64: S in 32 instead of 64 registers). 256:
// the O accumulator alone is 128 registers a thread, so 64 query rows and 32-key tiles.
template <int kHeadDim>
struct HalfTileFor {
  using Traits = HalfTraits<kHeadDim, 128, 64, 4, 2>;
};
template <>
struct HalfTileFor<128> {
  using Traits = HalfTraits<128, 128, 32, 4, 2>;
};
template <>
struct HalfTileFor<256> {
  using Traits = HalfTraits<256, 64, 32, 4, 2>;
};

}  // namespace attn::fused
