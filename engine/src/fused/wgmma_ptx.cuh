// The PTX of Hopper's warpgroup MMA (sm_90a) that the wgmma kernels issue: wgmma.mma_async in
// the shapes they use, its fence, commit and wait, the shared-memory matrix descriptor, the
// async-proxy fence and setmaxnreg. d (m64nN, f32: N / 2 registers a thread) = A * B (+ d): SS
// reads A and B through shared-memory descriptors, RS takes A from registers (the mma.sync
// m16n8k16 A layout per warp, rows 16w..) and B transposed (MN-major). `accumulate` 0 ignores d's
// old value. One macro per form defines a shape's bf16 and fp16 instruction: N is the key tile
// (64, 128) for S and the head dim (64, 96, 128, 256) for O.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace attn::fused {

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
// softmax instead of running the softmax under it (NOTES.md, "The P V wait, where ptxas put it").
// It keeps
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

// Makes this thread's generic-proxy writes to shared memory (cp.async, st.shared) visible to the
// async proxy (wgmma's and TMA's reads); call before the barrier that publishes them.
__device__ __forceinline__ void FenceAsyncProxy() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// setmaxnreg: a warpgroup gives registers back (Release) or waits for them (Claim); kRegisters a
// thread, a multiple of 8.
template <int kRegisters>
__device__ __forceinline__ void ReleaseRegisters() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void ClaimRegisters() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
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

}  // namespace attn::fused
