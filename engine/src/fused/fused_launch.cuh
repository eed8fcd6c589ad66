// The `fused` backend's launchers: a head dim's compile-time instantiation of the mma.sync
// kernel (fused_kernel.cuh), the Hopper wgmma kernels (fused_wgmma.cuh and the warp-specialised
// fused_wgmma_ws.cuh, WgmmaHeadDim), the split-KV kernel (fused_split_kv.cuh) and the float32
// kernel. Included only by the per-head-dim fused_hdim<H>.cu files.
#pragma once

#include "fused/fused_kernel.cuh"
#include "fused/fused_split_kv.cuh"
#include "fused/fused_wgmma.cuh"
#include "fused/fused_wgmma_ws.cuh"

namespace attn {

template <int kHeadDim>
cudaError_t LaunchFusedHalf(const FusedParams& p, FusedHalfType type, FusedPath path,
                            cudaStream_t stream) {
  const bool bf16 = type == FusedHalfType::kBFloat16;
#if defined(ATTN_FUSED_WGMMA)
  if constexpr (WgmmaHeadDim(kHeadDim)) {
    if (path == FusedPath::kWgmmaWs) {
      using WsTraits = typename fused::WgmmaWsTileFor<kHeadDim>::Traits;
      cudaError_t error = cudaSuccess;
      if (bf16 ? fused::LaunchWgmmaWs<WsTraits, __nv_bfloat16>(p, stream, &error)
               : fused::LaunchWgmmaWs<WsTraits, __half>(p, stream, &error)) {
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
#endif
  using Traits = typename fused::HalfTileFor<kHeadDim>::Traits;
  return bf16 ? fused::LaunchHalf<Traits, __nv_bfloat16>(p, stream)
              : fused::LaunchHalf<Traits, __half>(p, stream);
}

template <int kHeadDim>
cudaError_t LaunchFusedFloat(const FusedParams& p, cudaStream_t stream) {
  return fused::LaunchFloat<kHeadDim>(p, stream);
}

template <int kHeadDim>
cudaError_t LaunchFusedSplitKv(const FusedParams& p, const FusedSplitKv& plan, FusedHalfType type,
                               cudaStream_t stream) {
  return type == FusedHalfType::kBFloat16
             ? fused::LaunchSplitKv<kHeadDim, __nv_bfloat16>(p, plan, stream)
             : fused::LaunchSplitKv<kHeadDim, __half>(p, plan, stream);
}

template <int kHeadDim>
bool FusedWgmmaWsTakesTileCounter() {
#if defined(ATTN_FUSED_WGMMA)
  if constexpr (WgmmaHeadDim(kHeadDim)) {
    return fused::WgmmaWsTileFor<kHeadDim>::Traits::kDynamic;
  }
#endif
  return false;
}

}  // namespace attn

// One head dim's instantiations: each fused_hdim<H>.cu holds exactly this line.
#define ATTN_FUSED_INSTANTIATE(H)                                                       \
  namespace attn {                                                                      \
  template cudaError_t LaunchFusedHalf<H>(const FusedParams&, FusedHalfType, FusedPath, \
                                          cudaStream_t);                                \
  template cudaError_t LaunchFusedFloat<H>(const FusedParams&, cudaStream_t);           \
  template cudaError_t LaunchFusedSplitKv<H>(const FusedParams&, const FusedSplitKv&,   \
                                             FusedHalfType, cudaStream_t);              \
  template bool FusedWgmmaWsTakesTileCounter<H>();                                      \
  }
