// See tensor_map.h.
#include "cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <atomic>
#include <optional>

#include "attn/overrides.h"

namespace attn {

namespace {

// The driver's encoder, looked up once; null where the driver predates CUDA 12.0.
PFN_cuTensorMapEncodeTiled_v12000 Encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encoder = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encoder;
}

// The L2 promotion of the copies' requests, in bytes: 128, a box row (one swizzle row), unless
// SetTmaL2PromotionOverride (attn/overrides.h) says otherwise. With 256 the split-KV kernel's
// loads asked L2 for 25% more sectors than K and V hold (fused NOTES.md, "The TMA loads' L2
// promotion").
std::atomic<int> promotion_bytes{128};

CUtensorMapL2promotion Promotion() {
  switch (promotion_bytes.load(std::memory_order_relaxed)) {
    case 0:
      return CU_TENSOR_MAP_L2_PROMOTION_NONE;
    case 64:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    case 256:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    default:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  }
}

}  // namespace

void SetTmaL2PromotionOverride(std::optional<int> bytes) {
  promotion_bytes.store(bytes.value_or(128), std::memory_order_relaxed);
}

bool EncodeSwizzledTensorMap(CUtensorMap* map, const void* base, int rank, const uint64_t* sizes,
                             const uint64_t* byte_strides, const uint32_t* box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = Encoder();
  if (encode == nullptr || rank < 1 || rank > 5 || box[0] * 2 != 128) return false;
  cuuint64_t dims[5], strides[4];
  cuuint32_t boxes[5], steps[5];
  for (int i = 0; i < rank; ++i) {
    dims[i] = sizes[i];
    boxes[i] = box[i];
    steps[i] = 1;
    if (i > 0) strides[i - 1] = byte_strides[i - 1];
  }
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, static_cast<cuuint32_t>(rank),
                const_cast<void*>(base), dims, strides, boxes, steps, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, Promotion(),
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace attn
