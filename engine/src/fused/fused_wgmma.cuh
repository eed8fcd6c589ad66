// The `fused` backend's Hopper kernel (sm_90a): FlashAttention's forward on warpgroup MMA
// (wgmma), included by the fused_hdim<H>.cu of every head dim WgmmaHeadDim names, beside the
// mma.sync kernel of fused_kernel.cuh, whose helpers (cp.async, exp2, packing, the lazy rescale) it
// shares.
//
// One block of two warpgroups per (128-row query tile, head, batch); each warpgroup owns 64 rows:
//  - Q, and K/V tiles of kBlockN keys (double-buffered, cp.async one tile ahead: tile j + 1's
//    copies are issued while the tensor cores compute tile j's S, and awaited while they compute
//    its P V), sit in shared memory in the 128-byte-swizzled layout that wgmma reads through
//    matrix descriptors: rows of 64 elements (128 bytes), the 16-byte chunks of row r
//    XOR-permuted by r % 8, head dims past 64 in a second region;
//  - S = Q K^T: H/16 wgmma m64nBNk16 with A (Q) and B (K) from shared memory, both K-major;
//  - the online softmax (fused_kernel.cuh's lazy rescale) runs on S in registers: the wgmma
//    accumulator layout is mma.sync's per 8-column block, so P packs into wgmma's register-A
//    fragments without moving data between threads;
//  - O += P V: BN/16 wgmma m64nHk16 with A = P from registers and B = V from shared memory,
//    read transposed (MN-major: V's rows are keys, its contiguous dim is the head dim).
// Shared memory written by cp.async (the generic proxy) is fenced to the async proxy before
// the barrier that publishes it to wgmma.
#pragma once

#include "fused/fused_kernel.cuh"

namespace attn::fused {

// ---------------------------------------------------------------------------------------------
// wgmma wrappers (sm_90a). d (m64nN, f32: N / 2 registers a thread) = A * B (+ d): SS reads A
// and B through shared-memory descriptors, RS takes A from registers (the mma.sync m16n8k16 A
// layout per warp, rows 16w..) and B transposed (MN-major). `accumulate` 0 ignores d's old value.
// One macro per form defines a shape's bf16 and fp16 instruction: N is the key tile (64, 128)
// for S and the head dim (64, 96, 128, 256) for O.

template <int kN, typename T>
__device__ void WgmmaSS(float (&d)[kN / 2], uint64_t a_desc, uint64_t b_desc, int accumulate);
template <int kN, typename T>
__device__ void WgmmaRS(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b_desc);

// The accumulator: "{%0, ..., %R-1}" in the instruction and "+f"(d[i]) operands in the asm
// (outputs are numbered first, so the other operands start at %R).
#define ATTN_WGMMA_R0                                                                          \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define ATTN_WGMMA_R32 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define ATTN_WGMMA_R48 \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define ATTN_WGMMA_R64                                                                         \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, " \
  "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, " \
  "%100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, " \
  "%115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define ATTN_WGMMA_D32 "{" ATTN_WGMMA_R0 "}"
#define ATTN_WGMMA_D48 "{" ATTN_WGMMA_R0 ", " ATTN_WGMMA_R32 "}"
#define ATTN_WGMMA_D64 "{" ATTN_WGMMA_R0 ", " ATTN_WGMMA_R32 ", " ATTN_WGMMA_R48 "}"
#define ATTN_WGMMA_D128 \
  "{" ATTN_WGMMA_R0 ", " ATTN_WGMMA_R32 ", " ATTN_WGMMA_R48 ", " ATTN_WGMMA_R64 "}"
#define ATTN_WGMMA_OUT32(d)                                                                       \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define ATTN_WGMMA_OUT48(d)                                                                      \
  ATTN_WGMMA_OUT32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),          \
      "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define ATTN_WGMMA_OUT64(d)                                                                      \
  ATTN_WGMMA_OUT48(d), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]),          \
      "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), \
      "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define ATTN_WGMMA_OUT128(d)                                                                     \
  ATTN_WGMMA_OUT64(d), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]),          \
      "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), \
      "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), \
      "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), \
      "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), \
      "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]),           \
      "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]),        \
      "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]),        \
      "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),        \
      "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),        \
      "+f"(d[127])

// SS form: A_DESC, B_DESC and SCALE are the operand numbers after the accumulator.
#define ATTN_WGMMA_SS(N, R, A_DESC, B_DESC, SCALE, CTYPE, PTX)                                     \
  template <>                                                                                      \
  __device__ __forceinline__ void WgmmaSS<N, CTYPE>(float(&d)[R], uint64_t a_desc,                 \
                                                    uint64_t b_desc, int accumulate) {             \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE                                         \
                 ", 0;\n"                                                                          \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " ATTN_WGMMA_D##R \
                 ", " A_DESC ", " B_DESC ", p, 1, 1, 0, 0;\n}\n"                                   \
                 : ATTN_WGMMA_OUT##R(d)                                                            \
                 : "l"(a_desc), "l"(b_desc), "r"(accumulate));                                     \
  }
// RS form: A is four registers, B transposed; always accumulates.
#define ATTN_WGMMA_RS(N, R, A0, A1, A2, A3, B_DESC, SCALE, CTYPE, PTX)                             \
  template <>                                                                                      \
  __device__ __forceinline__ void WgmmaRS<N, CTYPE>(float(&d)[R], const uint32_t(&a)[4],           \
                                                    uint64_t b_desc) {                             \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE                                         \
                 ", 0;\n"                                                                          \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " " ATTN_WGMMA_D##R \
                 ", {" A0 ", " A1 ", " A2 ", " A3 "}, " B_DESC ", p, 1, 1, 1;\n}\n"                \
                 : ATTN_WGMMA_OUT##R(d)                                                            \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1));               \
  }

ATTN_WGMMA_SS(64, 32, "%32", "%33", "%34", __nv_bfloat16, "bf16")
ATTN_WGMMA_SS(128, 64, "%64", "%65", "%66", __nv_bfloat16, "bf16")
ATTN_WGMMA_SS(64, 32, "%32", "%33", "%34", __half, "f16")
ATTN_WGMMA_SS(128, 64, "%64", "%65", "%66", __half, "f16")
ATTN_WGMMA_RS(64, 32, "%32", "%33", "%34", "%35", "%36", "%37", __nv_bfloat16, "bf16")
ATTN_WGMMA_RS(96, 48, "%48", "%49", "%50", "%51", "%52", "%53", __nv_bfloat16, "bf16")
ATTN_WGMMA_RS(128, 64, "%64", "%65", "%66", "%67", "%68", "%69", __nv_bfloat16, "bf16")
ATTN_WGMMA_RS(256, 128, "%128", "%129", "%130", "%131", "%132", "%133", __nv_bfloat16, "bf16")
ATTN_WGMMA_RS(64, 32, "%32", "%33", "%34", "%35", "%36", "%37", __half, "f16")
ATTN_WGMMA_RS(96, 48, "%48", "%49", "%50", "%51", "%52", "%53", __half, "f16")
ATTN_WGMMA_RS(128, 64, "%64", "%65", "%66", "%67", "%68", "%69", __half, "f16")
ATTN_WGMMA_RS(256, 128, "%128", "%129", "%130", "%131", "%132", "%133", __half, "f16")
#undef ATTN_WGMMA_SS
#undef ATTN_WGMMA_RS
#undef ATTN_WGMMA_R0
#undef ATTN_WGMMA_R32
#undef ATTN_WGMMA_R48
#undef ATTN_WGMMA_R64
#undef ATTN_WGMMA_D32
#undef ATTN_WGMMA_OUT32
#undef ATTN_WGMMA_D48
#undef ATTN_WGMMA_OUT48
#undef ATTN_WGMMA_D64
#undef ATTN_WGMMA_OUT64
#undef ATTN_WGMMA_D128
#undef ATTN_WGMMA_OUT128

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending of this warpgroup's committed wgmma groups are still running
// (groups complete in commit order).
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// WgmmaWait<kPending> that ptxas keeps after `row_sums` is computed. ptxas schedules a wait as
// early as its basic block allows: after a consumer's softmax, the wait for the P V issued before
// it went to the top of the softmax's block, so the warpgroup sat out its own P V before the
// softmax instead of running the softmax under it (NOTES.md, 2026-12-05, from the SASS). It keeps
// the wait after a shared-memory store, so lane 0 of each warp first stores the row sums (the
// softmax's last result) to `slot`, 8 bytes of shared memory that warp owns and nobody reads.
template <int kPending>
__device__ __forceinline__ void WgmmaWaitAfter(const float (&row_sums)[2], uint32_t slot) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.eq.u32 p, %3, 0;\n@p st.shared.v2.f32 [%0], {%1, %2};\n"
      "wgmma.wait_group.sync.aligned %4;\n}\n" ::"r"(slot),
      "f"(row_sums[0]), "f"(row_sums[1]), "r"(threadIdx.x % 32), "n"(kPending)
      : "memory");
}
// Keeps the compiler from moving reads or writes of an accumulator across the asynchronous
// wgmma that owns it (the asm statements above do not tell it when the hardware writes d).
template <int kN>
__device__ __forceinline__ void FenceRegisters(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// An accumulator in the m16n8 layout ([n8 blocks][4]) as the flat register list the wgmma
// wrappers take: the same registers in the same order.
template <int kBlocks>
__device__ __forceinline__ float (&Flat(float (&d)[kBlocks][4]))[kBlocks * 4] {
  return reinterpret_cast<float(&)[kBlocks * 4]>(d);
}

// A shared-memory matrix descriptor for the 128-byte swizzle: start address, leading and stride
// byte offsets (16-byte units), layout type 1 (SWIZZLE_128B) in bits 62-63. K-major operands
// (Q, K): stride = 1024 bytes between 8-row groups, leading offset unused. MN-major (V): leading
// = bytes between 64-column regions, stride = 1024 bytes between 8-key groups.
__device__ __forceinline__ uint64_t SwizzledDescriptor(uint32_t smem_addr, uint32_t leading_bytes,
                                                       uint32_t stride_bytes) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFFu) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFFu) << 32 | uint64_t{1} << 62;
}

// The dynamic shared memory's start rounded up to the 128-byte swizzle atom's 1024-byte alignment
// (the kernels ask for 1 KiB more than their tiles take).
__device__ __forceinline__ uint32_t SwizzleAlignedBase(const void* smem) {
  return (static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + 1023u) & ~1023u;
}

// The steps both wgmma kernels (this one and fused_wgmma_ws.cuh's) take for one warpgroup's 64
// query rows.

// Issues S = Q K^T as one commit group: A = rows q_row0 .. q_row0 + 63 of the swizzled Q tile of
// kQRows rows at `q_tile`, B = the swizzled K tile of kBlockN keys at `k_tile`, both K-major.
template <int kHeadDim, int kQRows, int kBlockN, typename T>
__device__ __forceinline__ void IssueScores(float (&s)[kBlockN / 8][4], uint32_t q_tile, int q_row0,
                                            uint32_t k_tile) {
  WgmmaFence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) {
    const uint32_t k_offset = (ks % 4) * 32;  // 16 elements = 32 bytes into the atom
    const uint64_t a_desc =
        SwizzledDescriptor(q_tile + (ks / 4) * (kQRows * 128) + q_row0 * 128 + k_offset, 16, 1024);
    const uint64_t b_desc =
        SwizzledDescriptor(k_tile + (ks / 4) * (kBlockN * 128) + k_offset, 16, 1024);
    WgmmaSS<kBlockN, T>(Flat(s), a_desc, b_desc, ks > 0);
  }
  WgmmaCommit();
}

// P (the softmax's probabilities, in the accumulator layout) narrowed to T in wgmma's register-A
// layout, 16 keys a fragment: the same registers' values, no data moves between threads.
template <typename T, int kSBlocks>
__device__ __forceinline__ void PackProbabilities(uint32_t (&pa)[kSBlocks / 2][4],
                                                  const float (&s)[kSBlocks][4]) {
#pragma unroll
  for (int kk = 0; kk < kSBlocks / 2; ++kk) {
    pa[kk][0] = HalfOps<T>::Pack(s[2 * kk][0], s[2 * kk][1]);
    pa[kk][1] = HalfOps<T>::Pack(s[2 * kk][2], s[2 * kk][3]);
    pa[kk][2] = HalfOps<T>::Pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[kk][3] = HalfOps<T>::Pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
  }
}

// Issues O += P V as one commit group, 16 keys a wgmma: A = pa, B = the swizzled V tile of kBlockN
// keys at `v_tile`, read MN-major (transposed).
template <int kHeadDim, int kBlockN, typename T>
__device__ __forceinline__ void IssuePv(float (&o)[kHeadDim / 8][4],
                                        const uint32_t (&pa)[kBlockN / 16][4], uint32_t v_tile) {
  WgmmaFence();
  FenceRegisters(Flat(o));
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    const uint64_t b_desc = SwizzledDescriptor(v_tile + kk * 16 * 128, kBlockN * 128, 1024);
    WgmmaRS<kHeadDim, T>(Flat(o), pa[kk], b_desc);
  }
  WgmmaCommit();
}

template <int kHeadDim_, int kBlockN_, int kMinBlocksPerSm_>
struct WgmmaTraits {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockM = 128;  // two warpgroups of 64 rows
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;
  static constexpr int kThreads = 256;
  static constexpr int kChunks = kHeadDim / 8;  // 16-byte chunks per row
  // A tile is ceil(H / 64) regions of 128-byte rows (the swizzle atom's width); H = 96 leaves
  // the second region's rows half used.
  static constexpr int kRegions = (kHeadDim + 63) / 64;
  static constexpr int kQBytes = kBlockM * kRegions * 128;
  static constexpr int kKvBytes = kBlockN * kRegions * 128;
  // + 1 KiB: the base is rounded up to the swizzle atom's 1024-byte alignment.
  static constexpr int kSmemBytes = kQBytes + 4 * kKvBytes + 1024;
  static_assert(kHeadDim % 32 == 0 && kHeadDim <= 256, "wgmma N = head dim: 64, 96, 128 or 256");
  static_assert(kBlockN == 64 || kBlockN == 128, "wgmma N = kBlockN: 64 or 128");
  static_assert(kMinBlocksPerSm * kSmemBytes <= 227 * 1024, "shared memory of the resident blocks");
};

// Copies kRows rows (row stride `stride` elements) into a swizzled tile at shared address
// `tile`; rows >= valid_rows are zero-filled.
template <typename Traits, int kRows, typename T>
__device__ __forceinline__ void LoadSwizzled(uint32_t tile, const T* gmem, int64_t stride,
                                             int valid_rows, int tid) {
  CopyRows<Traits::kThreads, Traits::kChunks, kRows>(
      gmem, stride, valid_rows, tid,
      [&](int r, int c) { return tile + SwizzledOffset<kRows>(r, c); });
}

template <typename Traits, typename T>
__global__ void __launch_bounds__(Traits::kThreads, Traits::kMinBlocksPerSm)
    FusedWgmmaKernel(const FusedParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kBlockM = Traits::kBlockM, kBlockN = Traits::kBlockN, kHeadDim = Traits::kHeadDim;
  constexpr int kSBlocks = kBlockN / 8, kOBlocks = kHeadDim / 8;  // n8 blocks of S and O

  extern __shared__ unsigned char smem_raw[];
  const uint32_t s_q = SwizzleAlignedBase(smem_raw);
  const uint32_t s_k = s_q + Traits::kQBytes;
  const uint32_t s_v = s_k + 2 * Traits::kKvBytes;

  const int head = blockIdx.y, batch = blockIdx.z;
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  // This thread's two rows of the tile (the accumulator layout): r0 and r0 + 8.
  const int r0 = wg * 64 + warp * 16 + lane / 4;

  const QueryTile<T> tile = TileOfBlock<T, kBlockM, kBlockN>(p);
  const int q0 = tile.q0, n_tiles = tile.n_tiles, kv_len = tile.kv_len;
  const T *q = tile.q, *k = tile.k, *v = tile.v;

  LoadSwizzled<Traits, kBlockM>(s_q, q, p.q_row_stride, min(kBlockM, p.q_len - q0), tid);
  auto load_kv = [&](int tile) {
    const int key0 = tile * kBlockN, valid = min(kBlockN, kv_len - key0);
    const uint32_t buffer = (tile % 2) * Traits::kKvBytes;
    LoadSwizzled<Traits, kBlockN>(s_k + buffer, k + key0 * p.k_row_stride, p.k_row_stride, valid,
                                  tid);
    LoadSwizzled<Traits, kBlockN>(s_v + buffer, v + key0 * p.v_row_stride, p.v_row_stride, valid,
                                  tid);
  };
  load_kv(0);
  CpAsyncCommit();

  // The accumulators in the m16n8 layout the shared softmax and epilogue take; the wgmma
  // wrappers see the same registers as one flat array (Flat).
  float o[kOBlocks][4];
#pragma unroll
  for (int d = 0; d < kOBlocks; ++d) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.f;
  RowSoftmax softmax;

  // Each thread's copies of a tile land and are fenced to the async proxy before the barrier
  // that publishes them: here for tile 0, at the end of iteration j - 1 for tile j, while the
  // tensor cores run that iteration's P V.
  CpAsyncWait<0>();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  for (int j = 0; j < n_tiles; ++j) {
    __syncthreads();  // tile j is in for every warpgroup; tile j - 1's buffers are free
    const uint32_t buffer = (j % 2) * Traits::kKvBytes;

    // S = Q K^T for this warpgroup's 64 rows.
    float s[kSBlocks][4];
    IssueScores<kHeadDim, kBlockM, kBlockN, T>(s, s_q, wg * 64, s_k + buffer);
    // Tile j + 1's copies go out while the tensor cores compute S (they fill the other buffer).
    if (j + 1 < n_tiles) load_kv(j + 1);
    CpAsyncCommit();
    WgmmaWait<0>();
    FenceRegisters(Flat(s));

    // Mask keys past S and (causal) after the query, only in tiles that have any.
    const int key0 = j * kBlockN;
    if (key0 + kBlockN > kv_len || (p.causal && key0 + kBlockN - 1 > q0)) {
      MaskScores(s, key0, {q0 + r0, q0 + r0 + 8}, kv_len, p.causal);
    }
    float alpha[2];
    if (__any_sync(0xffffffffu, OnlineSoftmax(s, softmax, p.scale_log2, alpha))) {
      RescaleRows(o, alpha);
    }

    // O += P V, 16 keys per wgmma; P's accumulator layout is wgmma's register-A layout.
    uint32_t pa[kBlockN / 16][4];
    PackProbabilities<T>(pa, s);
    IssuePv<kHeadDim, kBlockN, T>(o, pa, s_v + buffer);
    CpAsyncWait<0>();
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    WgmmaWait<0>();
    FenceRegisters(Flat(o));
  }

  // out = O / sum, written once; rows past T are dropped.
  StoreSlice(static_cast<T*>(p.out) + batch * p.o_batch_stride + head * p.o_head_stride, p, q0 + r0,
             2 * (lane % 4), o, softmax);
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

// The tile per head dim on Hopper (measurements: NOTES.md). H = 128: 64-key tiles and two
// blocks (16 warps) per SM, 1.07-1.10x faster than 128-key tiles with one block on the H200 (at
// 128 registers a thread the compiler spills 64 bytes, and it still wins: more warps hide the
// softmax behind the other blocks' wgmma). The ATTN_FUSED_WGMMA_H* macros exist for
// bench/fused_variants.sh.
#ifndef ATTN_FUSED_WGMMA_H128_BLOCK_N
#define ATTN_FUSED_WGMMA_H128_BLOCK_N 64
#endif
#ifndef ATTN_FUSED_WGMMA_H128_BLOCKS
#define ATTN_FUSED_WGMMA_H128_BLOCKS 2
#endif
#ifndef ATTN_FUSED_WGMMA_H64_BLOCK_N
#define ATTN_FUSED_WGMMA_H64_BLOCK_N 128
#endif
#ifndef ATTN_FUSED_WGMMA_H64_BLOCKS
#define ATTN_FUSED_WGMMA_H64_BLOCKS 1
#endif
template <int kHeadDim>
struct WgmmaTileFor;
template <>
struct WgmmaTileFor<128> {
  using Traits = WgmmaTraits<128, ATTN_FUSED_WGMMA_H128_BLOCK_N, ATTN_FUSED_WGMMA_H128_BLOCKS>;
};
template <>
struct WgmmaTileFor<64> {
  using Traits = WgmmaTraits<64, ATTN_FUSED_WGMMA_H64_BLOCK_N, ATTN_FUSED_WGMMA_H64_BLOCKS>;
};
// H = 96 as H = 128 (its tiles take the same shared memory: two 128-byte regions a row); H = 256:
// one block per SM (192 KiB of tiles; O alone is 128 registers a thread).
#ifndef ATTN_FUSED_WGMMA_H96_BLOCK_N
#define ATTN_FUSED_WGMMA_H96_BLOCK_N 64
#endif
#ifndef ATTN_FUSED_WGMMA_H256_BLOCK_N
#define ATTN_FUSED_WGMMA_H256_BLOCK_N 64
#endif
template <>
struct WgmmaTileFor<96> {
  using Traits = WgmmaTraits<96, ATTN_FUSED_WGMMA_H96_BLOCK_N, 2>;
};
template <>
struct WgmmaTileFor<256> {
  using Traits = WgmmaTraits<256, ATTN_FUSED_WGMMA_H256_BLOCK_N, 1>;
};

template <typename Traits, typename T>
cudaError_t LaunchWgmma(const FusedParams& p, cudaStream_t stream) {
  return LaunchTiles(FusedWgmmaKernel<Traits, T>, Traits::kBlockM, Traits::kThreads,
                     Traits::kSmemBytes, p, stream);
}

}  // namespace attn::fused
