// Device side of the tensor memory accelerator (sm_90 and newer): mbarriers and tiled bulk tensor
// copies through a CUtensorMap (tensor_map.h encodes them on the host). A copy's bytes land in
// shared memory through the async proxy and complete a transaction count on an mbarrier; threads
// wait on the barrier's phase parity. Built for older targets, every wrapper traps: callers pick
// these paths only on devices of compute capability 9.0 and newer.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace attn::tma {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define ATTN_TMA_ASM(...) asm volatile(__VA_ARGS__)
#else
#define ATTN_TMA_ASM(...) __trap()
#endif

// Sets up the barrier at shared address `bar` for `arrivals` arrivals a phase, then makes the
// set-up visible to the async proxy (call before the __syncthreads that publishes it).
__device__ __forceinline__ void MbarrierInit(uint32_t bar, int arrivals) {
  ATTN_TMA_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
  ATTN_TMA_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  ATTN_TMA_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Arrives on `bar` (one of its arrivals) and adds `bytes` to the transactions this phase awaits.
__device__ __forceinline__ void MbarrierArriveExpectTx(uint32_t bar, uint32_t bytes) {
  ATTN_TMA_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// Arrives on `bar` (one of its arrivals; no transaction bytes).
__device__ __forceinline__ void MbarrierArrive(uint32_t bar) {
  ATTN_TMA_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// Waits until the phase of `bar` with parity `parity` (0 for its first phase, then 1, 0, ...) has
// completed: its arrivals and its transaction bytes.
__device__ __forceinline__ void MbarrierWait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    ATTN_TMA_ASM(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Copies the box at element coordinates (c0, c1, c2, c3) (innermost first) of the 4-dim tensor
// `map` describes into shared memory at `dst` (aligned as the map's swizzle needs: 1024 bytes
// for 128-byte swizzle), completing its bytes on `bar`. `map` must live in kernel parameters
// (__grid_constant__), constant or global memory.
__device__ __forceinline__ void TmaLoad4d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                          int c0, int c1, int c2, int c3) {
  ATTN_TMA_ASM(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

#undef ATTN_TMA_ASM

}  // namespace attn::tma
