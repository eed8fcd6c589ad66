// The `fused` backend's split-KV kernel ("flash-decoding") for short queries, sm_80 and newer
// (the L4's build and the H200's alike), FusedPath::kSplitKv.
//
// Decode reads a long K/V cache with a few query rows: one block per (query tile, head, batch)
// leaves most SMs idle and, with GQA, reads each K/V head once per query head. Here:
//  - a block owns one K/V head's packed (query, group) rows, row = t * group + g for query t of
//    query head kv_head * group + g, up to 64 of them (row_tiles 16-row mma slices), so every
//    K/V byte it loads feeds all query heads of its group;
//  - the key range [0, kv_end) is cut into `splits` ranges of split_keys keys, one block each
//    (grid: (K/V heads x row groups) x splits x batch, K/V heads fastest), sized by PlanSplitKv
//    (heuristics.h) to fill the GPU;
//  - K/V tiles of kTileKeys keys stream through 2 or 3 shared-memory stages (all but one in
//    flight while one is computed; the plan fits them to the device; TMA plans up to
//    kSplitKvMaxTmaStages where forced, SetSplitKvStagesOverride): on compute capability 9.0+
//    for H a multiple of 64, TMA box copies issued by one thread into 128-byte-swizzled tiles
//    with an mbarrier a stage (plan.tma; T16 on the H200 0.237 -> 0.211 ms: NOTES.md, "TMA loads,
//    splits and the merge"), else cp.async by every thread into padded rows; a block's four
//    warps each own one 16-row slice and a share of each tile's 16-key chunks (four warps on one
//    slice split the keys four ways);
//  - S = Q K^T and O += P V on mma.sync m16n8k16 with the mma.sync kernel's ldmatrix addressing,
//    the shared mask and online softmax (mask.cuh, softmax.cuh) and packing;
//  - the warps of a slice merge through shared memory by their log-sum-exp; with one split the
//    block writes the output, otherwise its normalised partial O and log2-sum-exp go to the
//    workspace and SplitKvCombineKernel (split_kv_combine.cuh) merges the splits in a fixed order
//    (deterministic).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/from_float.cuh"
#include "cuda/tma.cuh"
#include "fused/fused_kernels.h"
#include "fused/fused_tensor_maps.h"
#include "fused/mask.cuh"
#include "fused/ptx.cuh"
#include "fused/query_tile.cuh"
#include "fused/smem_tiles.cuh"
#include "fused/softmax.cuh"
#include "fused/split_kv_combine.cuh"
#include "fused/tiles.h"

namespace attn::fused {

// K and V for the TMA loads (plan.tma): dims (H, K/V heads, S, B), boxes of 64 columns (one
// 128-byte swizzle row) by kSplitKvTileKeys keys.
struct SplitKvTensorMaps {
  CUtensorMap k, v;
};

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
  // The TMA layout (plan.tma, H a multiple of 64): a K or V tile is kHeadDim / 64 regions of
  // kTileKeys 128-byte swizzled rows, the stages start at the next 1024-byte boundary after Q.
  // Unpadded rows save 16 bytes a row, 2 KiB a stage, more than the alignment and the barriers
  // take, so the padded layout's SmemBytes holds it.
  static constexpr int kTmaTileBytes = kTileKeys * kHeadDim * 2;
  static_assert(kTileKeys * 16 * 2 >= 1024 + 8 * kSplitKvMaxTmaStages,
                "the TMA layout fits the padded one's bytes");
};

template <typename Traits, typename T, bool kTma>
__global__ void __launch_bounds__(Traits::kThreads, 2)
    FusedSplitKvKernel(const FusedParams p, const FusedSplitKv plan,
                       const __grid_constant__ SplitKvTensorMaps maps) {
  using Ops = HalfOps<T>;
  constexpr int kHeadDim = Traits::kHeadDim, kTileKeys = Traits::kTileKeys;
  constexpr int kDBlocks = Traits::kDBlocks, kRowElems = Traits::kRowElems;
  constexpr int kChunks = Traits::kChunks, kThreads = Traits::kThreads;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The merge kernel (plan.dependent_merge) may launch now; it waits (griddepcontrol.wait) for
  // this grid's memory: 1-4% faster where a merge runs (NOTES.md, "TMA loads, splits and the
  // merge").
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  const int row_tiles = plan.row_tiles, key_slices = Traits::kWarps / row_tiles;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* const s_q = reinterpret_cast<T*>(smem_raw);
  const int stages = plan.stages;  // 2 or 3; with TMA up to kSplitKvMaxTmaStages
  // Stage i: K then V. Padded rows for cp.async; 128-byte swizzled regions, 1024-byte aligned,
  // for TMA (Traits::kTmaTileBytes).
  constexpr int kStageBytes = kTma ? 2 * Traits::kTmaTileBytes : 2 * Traits::kKvElems * 2;
  const uint32_t q_end =
      static_cast<uint32_t>(__cvta_generic_to_shared(s_q + 16 * row_tiles * kRowElems));
  unsigned char* const s_kv = reinterpret_cast<unsigned char*>(s_q + 16 * row_tiles * kRowElems) +
                              (kTma ? ((q_end + 1023u) & ~1023u) - q_end : 0u);
  const uint32_t kv_addr = static_cast<uint32_t>(__cvta_generic_to_shared(s_kv));
  float* const s_stats = reinterpret_cast<float*>(s_kv + stages * kStageBytes);
  // kTma: one mbarrier a stage, its phase completing when the stage's K and V are in.
  __shared__ uint64_t s_full[kSplitKvMaxTmaStages];
  const uint32_t full0 = static_cast<uint32_t>(__cvta_generic_to_shared(s_full));
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
  // Tile `tile` into its stage: cp.async by every thread (rows past key_end zero-filled), or
  // with TMA by thread 0, four (H / 64 per K and V) box copies completing on the stage's barrier.
  auto load_kv = [&](int tile) {
    const int key0 = key_begin + tile * kTileKeys, stage = tile % stages;
    unsigned char* dst = s_kv + stage * kStageBytes;
    if constexpr (kTma) {
      if (tid == 0) {
        const uint32_t bar = full0 + 8 * stage, at = kv_addr + stage * kStageBytes;
        tma::MbarrierArriveExpectTx(bar, kStageBytes);
#pragma unroll
        for (int r = 0; r < kHeadDim / 64; ++r) {
          tma::TmaLoad4d(at + r * kTileKeys * 128, &maps.k, bar, r * 64, kv_head, key0, batch);
          tma::TmaLoad4d(at + Traits::kTmaTileBytes + r * kTileKeys * 128, &maps.v, bar, r * 64,
                         kv_head, key0, batch);
        }
      }
    } else {
      const int valid = min(kTileKeys, key_end - key0);
      T* stage_k = reinterpret_cast<T*>(dst);
      LoadTile<Traits, kTileKeys>(stage_k, k + key0 * p.k_row_stride, p.k_row_stride, valid, tid);
      LoadTile<Traits, kTileKeys>(stage_k + Traits::kKvElems, v + key0 * p.v_row_stride,
                                  p.v_row_stride, valid, tid);
    }
  };
  // ldmatrix's 16-byte row pieces: (key row, 16-byte chunk) of a stage's K or V.
  auto kv_at = [&](const unsigned char* tile, int row, int chunk) -> const void* {
    if constexpr (kTma) return tile + SwizzledOffset<kTileKeys>(row, chunk);
    return reinterpret_cast<const T*>(tile) + row * kRowElems + chunk * 8;
  };
  // Tiles 0 .. stages - 2 go out first. TMA: thread 0 sets up the barriers and issues them
  // before anyone waits for Q, so the K/V stream need not wait for Q's latency (no change measured:
  // the kernel streams within 5% of loads alone; NOTES.md, "Causal items in groups of heads").
  // cp.async: Q joins tile 0's
  // group; one commit group per tile, empty past the last, so a wait for all but stages - 2 groups
  // is a wait for tile j.
  if constexpr (kTma) {
    if (tid == 0) {
      for (int i = 0; i < stages; ++i) tma::MbarrierInit(full0 + 8 * i, 1);
      for (int j = 0; j < stages - 1 && j < n_tiles; ++j) load_kv(j);
    }
    CpAsyncCommit();  // Q
    CpAsyncWait<0>();
    __syncthreads();  // Q and the barriers are ready
  } else {
    for (int j = 0; j < stages - 1; ++j) {
      if (j < n_tiles) load_kv(j);
      CpAsyncCommit();
    }
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
  const int k_row = lane % 8 + 8 * (lane / 16), k_chunk = (lane / 8) % 2;
  const int v_row = lane % 8 + 8 * ((lane / 8) % 2), v_chunk = lane / 16;

  for (int j = 0; j < n_tiles; ++j) {
    const int key0 = key_begin + j * kTileKeys;
    const unsigned char* ck = s_kv + (j % stages) * kStageBytes;
    const unsigned char* cv = ck + kStageBytes / 2;
    if constexpr (kTma) {
      __syncthreads();  // every warp is done with tile j - 1's stage, refilled now
      if (j + stages - 1 < n_tiles) load_kv(j + stages - 1);
      tma::MbarrierWait(full0 + 8 * (j % stages), (j / stages) % 2);
      // A box reads whole 64-key tiles: keys past key_end (another split's, or past a kv_lens
      // length, where a cache may hold anything) must not reach O. Their scores are masked;
      // their V rows are zeroed, as 0 * NaN would not be 0.
      if (const int valid = key_end - key0; valid < kTileKeys) {
        unsigned char* tail = const_cast<unsigned char*>(cv);
        constexpr int kRowChunks = kHeadDim / 8;  // 16-byte chunks of a V row, all regions
        for (int i = tid; i < (kTileKeys - valid) * kRowChunks; i += kThreads) {
          const int row = valid + i / kRowChunks, chunk = i % kRowChunks;
          *reinterpret_cast<uint4*>(tail + SwizzledOffset<kTileKeys>(row, chunk)) = uint4{};
        }
        __syncthreads();
      }
    } else {
      if (stages == 3) {
        CpAsyncWait<1>();
      } else {
        CpAsyncWait<0>();
      }
      __syncthreads();  // tile j is in; every warp is done with tile j - 1's stage, refilled now
      if (j + stages - 1 < n_tiles) load_kv(j + stages - 1);
      CpAsyncCommit();
    }
    for (int c = key_slice; c < kTileKeys / 16; c += key_slices) {
      const int chunk0 = key0 + c * 16;
      if (chunk0 >= key_end) break;
      float s[2][4] = {};
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks) {
        uint32_t a[4], b[4];
        LdMatrixX4(a, s_q + (slice * 16 + a_row) * kRowElems + ks * 16 + a_col);
        LdMatrixX4(b, kv_at(ck, c * 16 + k_row, ks * 2 + k_chunk));
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
        LdMatrixX4Trans(b, kv_at(cv, c * 16 + v_row, d + v_chunk));
        Ops::Mma(o[d], pa, b[0], b[1]);
        Ops::Mma(o[d + 1], pa, b[2], b[3]);
      }
    }
  }
  if constexpr (!kTma) CpAsyncWait<0>();
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

// Launches the split kernel along `plan` and, for more than one split, the merge with
// `combine_warps` warps a row (heuristics.h's CombineWarps).
template <int kHeadDim, typename T>
cudaError_t LaunchSplitKv(const FusedParams& p, const FusedSplitKv& plan, int combine_warps,
                          cudaStream_t stream) {
  using Traits = SplitKvTraits<kHeadDim>;
  // TMA where the plan asks for it (compute capability 9.0+), this build has sm_90 code and
  // the head dim fills whole 64-column regions; cp.async otherwise.
  SplitKvTensorMaps maps{};
  bool tma = false;
#if defined(ATTN_HAVE_SM90A)
  if constexpr (kHeadDim % 64 == 0) {
    if (plan.tma) {
      tma = EncodeOperandMap(&maps.k, p, FusedOperand::kK, kHeadDim, kSplitKvTileKeys) &&
            EncodeOperandMap(&maps.v, p, FusedOperand::kV, kHeadDim, kSplitKvTileKeys);
    }
  }
#endif
  auto* kernel = tma ? FusedSplitKvKernel<Traits, T, true> : FusedSplitKvKernel<Traits, T, false>;
  const int smem = Traits::SmemBytes(plan.row_tiles, plan.stages);
  if (cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
      e != cudaSuccess) {
    return e;
  }
  const dim3 grid((p.heads / p.group) * plan.row_groups, plan.splits, p.batch);
  kernel<<<grid, Traits::kThreads, smem, stream>>>(p, plan, maps);
  if (plan.splits > 1) {
    const int64_t rows = static_cast<int64_t>(p.batch) * (p.heads / p.group) * p.q_len * p.group;
    const int64_t rows_per_block = kCombineWarps / combine_warps;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
    config.blockDim = dim3(kCombineWarps * 32);
    config.stream = stream;
    cudaLaunchAttribute dependent{};
    dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    dependent.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &dependent;
    config.numAttrs = plan.dependent_merge ? 1 : 0;
    if (cudaError_t e =
            cudaLaunchKernelEx(&config, SplitKvCombineKernel<kHeadDim, T>, p, plan, combine_warps);
        e != cudaSuccess) {
      return e;
    }
  }
  return cudaGetLastError();
}

}  // namespace attn::fused
