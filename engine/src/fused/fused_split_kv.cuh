// The `fused` backend's split-KV kernel ("flash-decoding") for short queries, sm_80 and newer
// (the L4's build and the H200's alike), included through fused_launch.cuh.
//
// Decode reads a long K/V cache with a few query rows: one block per (query tile, head, batch)
// leaves most SMs idle and, with GQA, reads each K/V head once per query head. Here:
//  - a block owns one K/V head's packed (query, group) rows, row = t * group + g for query t of
//    query head kv_head * group + g, up to 64 of them (row_tiles 16-row mma slices), so every
//    K/V byte it loads feeds all query heads of its group;
//  - the key range [0, kv_end) is cut into `splits` ranges of split_keys keys, one block each
//    (grid: (K/V heads x row groups) x splits x batch, K/V heads fastest), sized by PlanSplitKv
//    (split_kv_plan.h) to fill the GPU;
//  - K/V tiles of kTileKeys keys stream through 2 or 3 shared-memory stages (cp.async, all but
//    one in flight while one is computed; the plan fits them to the device); a block's four
//    warps each own one 16-row slice and a share of each tile's 16-key chunks (four warps on one
//    slice split the keys four ways);
//  - S = Q K^T and O += P V on mma.sync m16n8k16 with fused_kernel.cuh's ldmatrix addressing, the
//    shared mask, online softmax (lazy rescale) and packing;
//  - the warps of a slice merge through shared memory by their log-sum-exp; with one split the
//    block writes the output, otherwise its normalised partial O and log2-sum-exp go to the
//    workspace and SplitKvCombineKernel merges the splits in a fixed order (deterministic).
#pragma once

#include "cuda/from_float.cuh"
#include "fused/fused_kernel.cuh"

namespace attn::fused {

template <int kHeadDim_>
struct SplitKvTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kWarps = kSplitKvWarps;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kTileKeys = kSplitKvTileKeys;
  static constexpr int kChunks = kHeadDim / 8;
  static constexpr int kDBlocks = kHeadDim / 8;
  static constexpr int kRowElems = kHeadDim + 8;  // padded rows, as the mma.sync kernel's
  static constexpr int kKvElems = kTileKeys * kRowElems;
  // Shared memory: Q (16 * row_tiles rows), `stages` K/V stages, then per warp and row max, sum.
  static constexpr int SmemBytes(int row_tiles, int stages) {
    return SplitKvSmemBytes(kHeadDim, row_tiles, stages);
  }
  static_assert(SmemBytes(4, 2) == (64 + 4 * kTileKeys) * kRowElems * 2 + kWarps * 16 * 8,
                "SplitKvSmemBytes describes this layout");
  static_assert(SmemBytes(4, 2) <= 227 * 1024, "the largest block fits an H100/H200 SM");
  static_assert(kTileKeys % 16 == 0 && kDBlocks % 2 == 0, "16-key chunks, n8 blocks in pairs");
  static_assert(kWarps * 16 * kHeadDim * 4 <= 2 * 2 * kKvElems * 2,
                "the warps' O (fp32) fit in the K/V stages they reuse");
};

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, 2)
    FusedSplitKvKernel(const FusedParams p, const FusedSplitKv plan) {
  using Ops = HalfOps<T>;
  constexpr int kHeadDim = Traits::kHeadDim, kTileKeys = Traits::kTileKeys;
  constexpr int kDBlocks = Traits::kDBlocks, kRowElems = Traits::kRowElems;
  constexpr int kChunks = Traits::kChunks, kThreads = Traits::kThreads;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row_tiles = plan.row_tiles, key_slices = Traits::kWarps / row_tiles;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);
  T* const s_kv = s_q + 16 * row_tiles * kRowElems;  // stage i: K at 2i, V at 2i + 1
  const int stages = plan.stages;                    // 2 or 3
  float* const s_stats = reinterpret_cast<float*>(s_kv + 2 * stages * Traits::kKvElems);
  float* const s_o = reinterpret_cast<float*>(s_kv);  // after the loop: [warp][16][kHeadDim]
  const int slice = warp % row_tiles, key_slice = warp / row_tiles;
  const int block_rows = 16 * row_tiles;
  // Grid: (K/V heads x row groups, splits, batch), K/V heads fastest: blocks launched together
  // read the neighbouring heads' rows of the same keys (K/V rows are (heads, H) contiguous).
  const int kv_heads = p.heads / p.group;
  const int split = blockIdx.y, row_group = blockIdx.x / kv_heads;
  const int kv_head = blockIdx.x % kv_heads, batch = blockIdx.z;
  const int rows = p.q_len * p.group;  // packed rows of this K/V head
  const int row0 = row_group * block_rows;

  // The block's keys: its split of [0, kv_end), where kv_end stops at the block's last query
  // when causal (top-left: query t sees keys <= t).
  const int kv_len = KvLength(p, batch);
  const int last_t = (min(row0 + block_rows, rows) - 1) / p.group;
  const int kv_end = p.causal ? min(kv_len, last_t + 1) : kv_len;
  const int key_begin = split * plan.split_keys;
  const int key_end = min(key_begin + plan.split_keys, kv_end);
  const int n_tiles = key_end > key_begin ? (key_end - key_begin + kTileKeys - 1) / kTileKeys : 0;

  // Q: packed row r is query t = r / group of head kv_head * group + r % group.
  const T* q = static_cast<const T*>(p.q) + batch * p.q_batch_stride;
  for (int i = tid; i < block_rows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks, packed = row0 + r;
    const bool valid = packed < rows;
    const T* src = q + c * 8;
    if (valid) {
      src += (packed / p.group) * p.q_row_stride +
             (kv_head * p.group + packed % p.group) * p.q_head_stride;
    }
    CpAsync16(s_q + r * kRowElems + c * 8, src, valid);
  }
  const T* k = static_cast<const T*>(p.k) + batch * p.k_batch_stride + kv_head * p.k_head_stride;
  const T* v = static_cast<const T*>(p.v) + batch * p.v_batch_stride + kv_head * p.v_head_stride;
  auto load_kv = [&](int tile) {
    const int key0 = key_begin + tile * kTileKeys, valid = min(kTileKeys, key_end - key0);
    T* stage = s_kv + (tile % stages) * 2 * Traits::kKvElems;
    LoadTile<Traits, kTileKeys>(stage, k + key0 * p.k_row_stride, p.k_row_stride, valid, tid);
    LoadTile<Traits, kTileKeys>(stage + Traits::kKvElems, v + key0 * p.v_row_stride, p.v_row_stride,
                                valid, tid);
  };
  // Tiles 0 .. stages - 2 go out first (Q joins tile 0's group); one commit group per tile,
  // empty past the last, so a wait for all but stages - 2 groups is a wait for tile j.
  for (int j = 0; j < stages - 1; ++j) {
    if (j < n_tiles) load_kv(j);
    CpAsyncCommit();
  }

  float o[kDBlocks][4];
#pragma unroll
  for (int d = 0; d < kDBlocks; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  RowSoftmax softmax;
  const int quad_row = lane / 4, quad_col = 2 * (lane % 4);
  const int first_row = row0 + slice * 16 + quad_row;  // this thread's rows: it and + 8
  const int t[2] = {first_row / p.group, (first_row + 8) / p.group};
  // ldmatrix addresses as in FusedHalfKernel.
  const int a_row = lane % 16, a_col = (lane / 16) * 8;
  const int k_row = lane % 8 + 8 * (lane / 16), k_col = ((lane / 8) % 2) * 8;
  const int v_row = lane % 8 + 8 * ((lane / 8) % 2), v_col = (lane / 16) * 8;

  for (int j = 0; j < n_tiles; ++j) {
    if (stages == 3) {
      CpAsyncWait<1>();
    } else {
      CpAsyncWait<0>();
    }
    __syncthreads();  // tile j is in; every warp is done with tile j - 1's stage, refilled now
    if (j + stages - 1 < n_tiles) load_kv(j + stages - 1);
    CpAsyncCommit();
    const T* ck = s_kv + (j % stages) * 2 * Traits::kKvElems;
    const T* cv = ck + Traits::kKvElems;
    const int key0 = key_begin + j * kTileKeys;
    for (int c = key_slice; c < kTileKeys / 16; c += key_slices) {
      const int chunk0 = key0 + c * 16;
      if (chunk0 >= key_end) break;
      float s[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        uint32_t a[4], b[4];
        LdMatrixX4(a, s_q + (slice * 16 + a_row) * kRowElems + ks * 16 + a_col);
        LdMatrixX4(b, ck + (c * 16 + k_row) * kRowElems + ks * 16 + k_col);
        Ops::Mma(s[0], a, b[0], b[1]);
        Ops::Mma(s[1], a, b[2], b[3]);
      }
      if (chunk0 + 16 > key_end || p.causal) MaskScores(s, chunk0, t, key_end, p.causal);
      float alpha[2];
      if (__any_sync(0xffffffffu, OnlineSoftmax(s, softmax, p.scale_log2, alpha))) {
        RescaleRows(o, alpha);
      }
      const uint32_t pa[4] = {Ops::Pack(s[0][0], s[0][1]), Ops::Pack(s[0][2], s[0][3]),
                              Ops::Pack(s[1][0], s[1][1]), Ops::Pack(s[1][2], s[1][3])};
#pragma unroll
      for (int d = 0; d < kDBlocks; d += 2) {
        uint32_t b[4];
        LdMatrixX4Trans(b, cv + (c * 16 + v_row) * kRowElems + d * 8 + v_col);
        Ops::Mma(o[d], pa, b[0], b[1]);
        Ops::Mma(o[d + 1], pa, b[2], b[3]);
      }
    }
  }
  CpAsyncWait<0>();
  __syncthreads();  // the K/V stages are free: they hold the warps' O from here

  // Each warp's rows: the scaled max its probabilities are relative to, the full sum, and O.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = quad_row + h * 8;
    const float sum = QuadSum(softmax.sum[h]);
    if (lane % 4 == 0) {
      s_stats[(warp * 16 + r) * 2] = sum > 0.f ? __fmul_rn(softmax.max[h], p.scale_log2) : 0.f;
      s_stats[(warp * 16 + r) * 2 + 1] = sum;
    }
    float* o_row = s_o + (warp * 16 + r) * kHeadDim + quad_col;
#pragma unroll
    for (int d = 0; d < kDBlocks; ++d) {
      *reinterpret_cast<float2*>(o_row + d * 8) = make_float2(o[d][2 * h], o[d][2 * h + 1]);
    }
  }
  __syncthreads();

  // Merge the key slices of each row: weights exp2(max_w - max) on sums and O, in warp order.
  const int part =
      ((batch * kv_heads + kv_head) * plan.row_groups + row_group) * plan.splits + split;
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride;
  for (int i = tid; i < block_rows * kHeadDim; i += kThreads) {
    const int r = i / kHeadDim, d = i % kHeadDim, packed = row0 + r;
    if (packed >= rows) continue;
    const int first_warp = r / 16, rr = r % 16;
    float mx = -INFINITY;
    for (int w = first_warp; w < Traits::kWarps; w += row_tiles) {
      if (s_stats[(w * 16 + rr) * 2 + 1] > 0.f) mx = fmaxf(mx, s_stats[(w * 16 + rr) * 2]);
    }
    float sum = 0.f, acc = 0.f;
    for (int w = first_warp; w < Traits::kWarps; w += row_tiles) {
      const float w_sum = s_stats[(w * 16 + rr) * 2 + 1];
      if (w_sum > 0.f) {
        const float weight = FastExp2(s_stats[(w * 16 + rr) * 2] - mx);
        sum += weight * w_sum;
        acc += weight * s_o[(w * 16 + rr) * kHeadDim + d];
      }
    }
    const float value = sum > 0.f ? acc / sum : 0.f;
    if (plan.splits == 1) {
      const int query = packed / p.group, head = kv_head * p.group + packed % p.group;
      out[query * p.o_row_stride + head * p.o_head_stride + d] = FromFloat<T>(value);
    } else {
      const int64_t at = static_cast<int64_t>(part) * block_rows + r;
      plan.partial_out[at * kHeadDim + d] = value;
      if (d == 0) plan.partial_lse[at] = sum > 0.f ? mx + __log2f(sum) : -INFINITY;
    }
  }
}

// Merges the splits' partial outputs: one warp per packed row of one (batch, K/V head), the
// splits in order, each weighted by exp2(its log2-sum-exp - the largest).
template <int kHeadDim, typename T>
__global__ void __launch_bounds__(128)
    SplitKvCombineKernel(const FusedParams p, const FusedSplitKv plan) {
  constexpr int kPerLane = kHeadDim / 32;
  const int lane = threadIdx.x % 32;
  const int rows = p.q_len * p.group, kv_heads = p.heads / p.group;
  const int64_t row_id = blockIdx.x * 4LL + threadIdx.x / 32;
  if (row_id >= static_cast<int64_t>(p.batch) * kv_heads * rows) return;
  const int packed = static_cast<int>(row_id % rows);
  const int kv_head = static_cast<int>(row_id / rows % kv_heads);
  const int batch = static_cast<int>(row_id / rows / kv_heads);
  const int block_rows = 16 * plan.row_tiles, row_group = packed / block_rows;
  const int64_t part0 =
      ((static_cast<int64_t>(batch) * kv_heads + kv_head) * plan.row_groups + row_group) *
      plan.splits;
  const int r = packed % block_rows;

  // Lanes read the log2-sum-exps 32 splits at a time; the O rows are then summed in split order
  // with the weights shuffled from their lanes, so the loads do not wait on one another (a
  // split at a time, one row took 30 us at 32 splits: ncu, 2026-12-04). Empty splits wrote O = 0
  // and lse = -inf (weight 0).
  const float* lse = plan.partial_lse + part0 * block_rows + r;
  const float* o = plan.partial_out + (part0 * block_rows + r) * kHeadDim + lane;
  float mx = -INFINITY;
  for (int s = lane; s < plan.splits; s += 32) mx = fmaxf(mx, lse[s * block_rows]);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float acc[kPerLane] = {};
  float lane_sum = 0.f;
  for (int s0 = 0; s0 < plan.splits; s0 += 32) {
    const int s = s0 + lane;
    const float lse_s = s < plan.splits ? lse[s * block_rows] : -INFINITY;
    const float weight = lse_s == -INFINITY ? 0.f : FastExp2(lse_s - mx);
    lane_sum += weight;
    const int n = min(32, plan.splits - s0);
#pragma unroll 4
    for (int k = 0; k < n; ++k) {
      const float w = __shfl_sync(0xffffffffu, weight, k);
      const float* row = o + static_cast<int64_t>(s0 + k) * block_rows * kHeadDim;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[i] += w * row[32 * i];
    }
  }
  float sum = lane_sum;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  T* out = static_cast<T*>(p.out) + batch * p.o_batch_stride + (packed / p.group) * p.o_row_stride +
           (kv_head * p.group + packed % p.group) * p.o_head_stride;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) out[lane + 32 * i] = FromFloat<T>(acc[i] * inv);
}

template <int kHeadDim, typename T>
cudaError_t LaunchSplitKv(const FusedParams& p, const FusedSplitKv& plan, cudaStream_t stream) {
  using Traits = SplitKvTraits<kHeadDim>;
  auto* kernel = FusedSplitKvKernel<Traits, T>;
  const int smem = Traits::SmemBytes(plan.row_tiles, plan.stages);
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid((p.heads / p.group) * plan.row_groups, plan.splits, p.batch);
  kernel<<<grid, Traits::kThreads, smem, stream>>>(p, plan);
  if (plan.splits > 1) {
    const int64_t rows = static_cast<int64_t>(p.batch) * (p.heads / p.group) * p.q_len * p.group;
    SplitKvCombineKernel<kHeadDim, T>
        <<<static_cast<unsigned>((rows + 3) / 4), 128, 0, stream>>>(p, plan);
  }
  return cudaGetLastError();
}

}  // namespace attn::fused
