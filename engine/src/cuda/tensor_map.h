// TMA descriptors (CUtensorMap) for the kernels' bulk tensor copies on sm_90 and newer. Encoded on
// the host through the driver's cuTensorMapEncodeTiled, looked up at run time through the CUDA
// runtime, so nothing links libcuda.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace attn {

// Describes a tensor of 2-byte elements (bf16 or fp16: a copy does not look at the values) for
// tiled bulk copies into 128-byte-swizzled shared memory: `rank` dims (1..5), innermost first,
// sizes[i] elements each; byte_strides[i] is dim i + 1's stride (dim 0 is contiguous); a copy
// moves a box of box[i] elements per dim, and box[0] * 2 must be 128 (one swizzle row).
// Requests are promoted in L2 to 128 bytes (tensor_map.cc says why; SetTmaL2PromotionOverride
// sets another, to measure). Elements outside the sizes read as zeros. Returns false,
// leaving `map` unspecified, where the driver has no TMA or refuses the tensor (base not 16-byte
// aligned, a stride not a multiple of 16 bytes or at least 2^40).
bool EncodeSwizzledTensorMap(CUtensorMap* map, const void* base, int rank, const uint64_t* sizes,
                             const uint64_t* byte_strides, const uint32_t* box);

}  // namespace attn
