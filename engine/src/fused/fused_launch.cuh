// The `fused` backend's launchers for one head dim (FusedLaunch, fused_kernels.h): the run-time
// path and dtype to a kernel instantiation, with each kernel's tile from tiles.h's table. Included
// only by the per-head-dim fused_hdim<H>.cu files, each of which instantiates FusedLaunch<H>.
#pragma once

#include "fused/float_kernel.cuh"
#include "fused/fused_kernels.h"
#include "fused/mma_sync_kernel.cuh"
#include "fused/split_kv_kernel.cuh"
#include "fused/tiles.h"
#include "fused/wgmma_kernel.cuh"
#include "fused/wgmma_ws_kernel.cuh"

namespace attn {

template <int kHeadDim>
cudaError_t FusedLaunch<kHeadDim>::Half(const FusedParams& p, FusedHalfType type, FusedPath path,
                                        int ws_head_group, cudaStream_t stream) {
  static_assert(FusedHeadDim(kHeadDim), "every instantiated head dim has a row in tiles.h");
  const bool bf16 = type == FusedHalfType::kBFloat16;
#if defined(ATTN_HAVE_SM90A)
  if constexpr (WgmmaHeadDim(kHeadDim)) {
    if (path == FusedPath::kWgmmaWs) {
      using WsTraits = typename fused::WgmmaWsTileFor<kHeadDim>::Traits;
      cudaError_t error = cudaSuccess;
      if (bf16 ? fused::LaunchWgmmaWs<WsTraits, __nv_bfloat16>(p, ws_head_group, stream, &error)
               : fused::LaunchWgmmaWs<WsTraits, __half>(p, ws_head_group, stream, &error)) {
        return error;
      }
    }
    if (path == FusedPath::kWgmma || path == FusedPath::kWgmmaWs) {
      using Traits = typename fused::WgmmaTileFor<kHeadDim>::Traits;
      return bf16 ? fused::LaunchWgmma<Traits, __nv_bfloat16>(p, stream)
                  : fused::LaunchWgmma<Traits, __half>(p, stream);
    }
  }
#else
  (void)path;
  (void)ws_head_group;
#endif
  using Traits = typename fused::HalfTileFor<kHeadDim>::Traits;
  return bf16 ? fused::LaunchHalf<Traits, __nv_bfloat16>(p, stream)
              : fused::LaunchHalf<Traits, __half>(p, stream);
}

template <int kHeadDim>
cudaError_t FusedLaunch<kHeadDim>::Float(const FusedParams& p, cudaStream_t stream) {
  return fused::LaunchFloat<kHeadDim>(p, stream);
}

template <int kHeadDim>
cudaError_t FusedLaunch<kHeadDim>::SplitKv(const FusedParams& p, const FusedSplitKv& plan,
                                           int combine_warps, FusedHalfType type,
                                           cudaStream_t stream) {
  return type == FusedHalfType::kBFloat16
             ? fused::LaunchSplitKv<kHeadDim, __nv_bfloat16>(p, plan, combine_warps, stream)
             : fused::LaunchSplitKv<kHeadDim, __half>(p, plan, combine_warps, stream);
}

}  // namespace attn
