// The cudnn_fp8 backend's own kernels. All memory-bound: the quantise kernel reads Q, K, V once
// (16 bytes per thread per step) and writes one byte per element.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "cudnn_fp8/fp8_kernels.h"

namespace attn::fp8 {
namespace {

using fp8_internal::DeviceScalars;

constexpr int kThreads = 256;
constexpr int kVec = 8;  // elements per thread per step: one 16-byte load of bf16/fp16

template <HalfType T>
struct Half;
template <>
struct Half<HalfType::kBFloat16> {
  using type = __nv_bfloat162;
  static __device__ float2 ToFloat2(type v) { return __bfloat1622float2(v); }
  static __device__ type FromFloat2(float2 v) { return __float22bfloat162_rn(v); }
};
template <>
struct Half<HalfType::kFloat16> {
  using type = __half2;
  static __device__ float2 ToFloat2(type v) { return __half22float2(v); }
  static __device__ type FromFloat2(float2 v) { return __float22half2_rn(v); }
};

__device__ float ScaleFrom(float amax, float previous, int margin) {
  // attn::ComputeScale, in the same float arithmetic (division, then an exact power of two).
  if (!(amax > 0.0f) || !isfinite(amax)) return previous;
  return ldexpf(448.0f / amax, -margin);
}

// Non-negative floats order like their bit patterns as ints.
__device__ void AtomicMaxNonNegative(float* slot, float v) {
  atomicMax(reinterpret_cast<int*>(slot), __float_as_int(v));
}

__device__ float BlockMax(float v) {
  __shared__ float warp_max[kThreads / 32];
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_max[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

__device__ int64_t SourceOffset(const Operand& op, bool packed, int64_t e) {
  if (packed) return e;
  const int64_t h = e % op.shape[3];
  int64_t r = e / op.shape[3];
  const int64_t head = r % op.shape[2];
  r /= op.shape[2];
  const int64_t l = r % op.shape[1], b = r / op.shape[1];
  return b * op.strides[0] + l * op.strides[1] + head * op.strides[2] + h;
}

// n / d for 0 <= n < 2^31 as a multiply and a shift (Granlund-Montgomery: l = ceil(log2 d),
// m = ceil(2^(32 + l) / d) makes floor(n * m / 2^(32 + l)) exact for every 32-bit n), set up on
// the host: a 64-bit division per element would cost more than the kernels' memory time.
struct FastDiv {
  uint32_t d = 1;
  uint64_t m = uint64_t{1} << 32;
  uint32_t shift = 32;
  static FastDiv For(uint32_t d) {
    FastDiv f;
    uint32_t l = 0;
    while ((uint64_t{1} << l) < d) ++l;
    f.d = d;
    f.shift = 32 + l;
    f.m = ((uint64_t{1} << f.shift) + d - 1) / d;
    return f;
  }
  __device__ uint32_t Div(uint32_t n) const { return static_cast<uint32_t>((n * m) >> shift); }
};

// Where an operand's E4M3 copy puts 8-element vector i of the packed (B, L, heads, H) order:
// at i, or heads-major at ((b * heads + head) * L + l) * H / 8 + chunk.
struct Fp8Layout {
  bool heads_major = false;
  FastDiv chunks, heads, len;  // H / 8, heads, L
  static Fp8Layout For(const Operand& op, bool heads_major) {
    Fp8Layout x;
    // One head or one position: both orders are the same bytes.
    x.heads_major = heads_major && op.shape[2] > 1 && op.shape[1] > 1;
    x.chunks = FastDiv::For(static_cast<uint32_t>(op.shape[3] / kVec));
    x.heads = FastDiv::For(static_cast<uint32_t>(op.shape[2]));
    x.len = FastDiv::For(static_cast<uint32_t>(op.shape[1]));
    return x;
  }
  // Byte offset of vector i's 8 E4M3 values (the backend keeps heads-major copies below 2^31
  // vectors).
  __device__ int64_t Offset(int64_t i) const {
    if (!heads_major) return i * kVec;
    const uint32_t v = static_cast<uint32_t>(i);
    const uint32_t row = chunks.Div(v), chunk = v - row * chunks.d;
    const uint32_t position = heads.Div(row), head = row - position * heads.d;
    const uint32_t b = len.Div(position), l = position - b * len.d;
    return ((static_cast<int64_t>(b) * heads.d + head) * len.d + l) * chunks.d * kVec +
           int64_t{chunk} * kVec;
  }
};

struct Params {
  Operand ops[3];
  bool packed[3];  // strides are the packed ones: element offset = packed index
  Fp8Layout layout[3];
  int64_t vectors[3];
  DeviceScalars* s;
};

// blockIdx.y picks the operand (Q, K, V); a grid-stride loop over its 8-element vectors.
template <HalfType T, bool kStore>
__global__ void __launch_bounds__(kThreads) QuantizeKernel(const Params p) {
  using H2 = typename Half<T>::type;
  const int which = blockIdx.y;
  const Operand& op = p.ops[which];
  const float scale = kStore ? p.s->scale[kFp8Q + which].value : 1.0f;
  float amax = 0.0f;
  // Two vectors per step, both loads issued before either is used: more bytes in flight.
  const int64_t stride = int64_t{gridDim.x} * kThreads, n = p.vectors[which];
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < n; i += 2 * stride) {
    uint4 raw[2];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (i + u * stride < n) {
        raw[u] = *reinterpret_cast<const uint4*>(
            static_cast<const uint16_t*>(op.src) +
            SourceOffset(op, p.packed[which], (i + u * stride) * kVec));
      }
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (i + u * stride >= n) break;
      const H2* h2 = reinterpret_cast<const H2*>(&raw[u]);
      __nv_fp8x2_storage_t packed[kVec / 2];
#pragma unroll
      for (int j = 0; j < kVec / 2; ++j) {
        float2 f = Half<T>::ToFloat2(h2[j]);
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
        if (kStore) {
          f.x *= scale;
          f.y *= scale;
          packed[j] = __nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3);
        }
      }
      if (kStore) {
        *reinterpret_cast<uint2*>(op.dst + p.layout[which].Offset(i + u * stride)) =
            *reinterpret_cast<const uint2*>(packed);
      }
    }
  }
  amax = BlockMax(amax);
  if (threadIdx.x == 0) AtomicMaxNonNegative(&p.s->amax[kFp8Q + which].value, amax);
}

template <HalfType T>
__global__ void __launch_bounds__(kThreads)
    DequantizeKernel(const uint8_t* src, Fp8Layout layout, void* out, Operand view, bool packed,
                     int64_t vectors, const DeviceScalars* s) {
  using H2 = typename Half<T>::type;
  const float descale = s->descale[kFp8O].value;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < vectors;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t e = i * kVec;
    const uint2 raw = *reinterpret_cast<const uint2*>(src + layout.Offset(i));
    const __nv_fp8x2_storage_t* f8 = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
    H2 h2[kVec / 2];
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      const __half2 wide = __half2(__nv_cvt_fp8x2_to_halfraw2(f8[j], __NV_E4M3));
      float2 f = __half22float2(wide);
      f.x *= descale;
      f.y *= descale;
      h2[j] = Half<T>::FromFloat2(f);
    }
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(out) + SourceOffset(view, packed, e)) =
        *reinterpret_cast<const uint4*>(h2);
  }
}

__global__ void CurrentScalesKernel(DeviceScalars* s, int margin, const float* descale_v_bound) {
  const int i = threadIdx.x;
  if (i >= kNumFp8Tensors) return;
  float scale;
  if (descale_v_bound != nullptr) {
    scale = i == kFp8S ? 448.0f : i == kFp8O ? 1.0f / *descale_v_bound : 1.0f;
  } else {
    const float amax = i == kFp8S ? 1.0f : i == kFp8O ? s->amax[kFp8V].value : s->amax[i].value;
    scale = ScaleFrom(amax, 1.0f, margin);
  }
  s->scale[i].value = scale;
  s->descale[i].value = 1.0f / scale;
}

// One warp per tensor.
__global__ void RecipeUpdateKernel(DeviceScalars* s, float* history, int len, bool most_recent,
                                   int margin, const fp8_internal::Scalar* chunk_amax,
                                   int extra_chunks) {
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int position = s->position;
  float* h = history + static_cast<int64_t>(w) * len;
  float amax = s->amax[w].value;
  if (w == kFp8S || w == kFp8O) {
    for (int c = 0; c < extra_chunks; ++c) {
      amax = fmaxf(amax, chunk_amax[2 * c + (w == kFp8O)].value);
    }
  }
  float reduced = amax;
  if (!most_recent) {
    for (int i = lane; i < len; i += 32) reduced = fmaxf(reduced, i == position ? amax : h[i]);
    for (int o = 16; o > 0; o >>= 1)
      reduced = fmaxf(reduced, __shfl_xor_sync(0xffffffffu, reduced, o));
  }
  __syncthreads();  // every warp has read `position` and its history
  if (lane == 0) {
    h[position] = amax;
    const float previous = s->scale[w].value;
    const float scale = ScaleFrom(reduced, previous, margin);
    s->used_scale[w].value = previous;
    s->seen_amax[w].value = amax;
    s->scale[w].value = scale;
    s->descale[w].value = 1.0f / scale;
    s->amax[w].value = 0.0f;
  }
  if (threadIdx.x == 0) {
    s->position = (position + 1) % len;
    s->updates += 1;
  }
}

bool IsPacked(const Operand& op) {
  return op.strides[3] == 1 && op.strides[2] == op.shape[3] &&
         op.strides[1] == op.shape[2] * op.shape[3] &&
         op.strides[0] == op.shape[1] * op.shape[2] * op.shape[3];
}

int64_t Elements(const Operand& op) {
  return op.shape[0] * op.shape[1] * op.shape[2] * op.shape[3];
}

// Enough resident blocks to keep the memory system busy (8 x 256 threads per SM), no more.
unsigned Blocks(int64_t vectors) {
  static const int sms = [] {
    int device = 0, count = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
    return count > 0 ? count : 1;
  }();
  const int64_t want = (vectors + kThreads - 1) / kThreads;
  const int64_t cap = int64_t{sms} * 8;
  return static_cast<unsigned>(want < 1 ? 1 : want < cap ? want : cap);
}

template <bool kStore>
cudaError_t LaunchQuantizeKernel(HalfType type, const Operand (&ops)[3], DeviceScalars* s,
                                 cudaStream_t stream) {
  Params p{};
  int64_t most = 0;
  for (int i = 0; i < 3; ++i) {
    p.ops[i] = ops[i];
    p.packed[i] = IsPacked(ops[i]);
    p.layout[i] = Fp8Layout::For(ops[i], ops[i].dst_heads_major);
    p.vectors[i] = Elements(ops[i]) / kVec;
    most = p.vectors[i] > most ? p.vectors[i] : most;
  }
  p.s = s;
  const dim3 grid(Blocks(most), 3);
  if (type == HalfType::kBFloat16) {
    QuantizeKernel<HalfType::kBFloat16, kStore><<<grid, kThreads, 0, stream>>>(p);
  } else {
    QuantizeKernel<HalfType::kFloat16, kStore><<<grid, kThreads, 0, stream>>>(p);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAmax(HalfType type, const Operand (&ops)[3], DeviceScalars* s,
                       cudaStream_t stream) {
  return LaunchQuantizeKernel<false>(type, ops, s, stream);
}

cudaError_t LaunchQuantize(HalfType type, const Operand (&ops)[3], DeviceScalars* s,
                           cudaStream_t stream) {
  return LaunchQuantizeKernel<true>(type, ops, s, stream);
}

cudaError_t LaunchCurrentScales(DeviceScalars* s, int margin, const float* descale_v_bound,
                                cudaStream_t stream) {
  CurrentScalesKernel<<<1, 32, 0, stream>>>(s, margin, descale_v_bound);
  return cudaGetLastError();
}

cudaError_t LaunchDequantize(HalfType type, const uint8_t* src, bool src_heads_major, void* out,
                             const int64_t (&shape)[4], const int64_t (&strides)[4],
                             const DeviceScalars* s, cudaStream_t stream) {
  Operand view{};
  for (int i = 0; i < 4; ++i) {
    view.shape[i] = shape[i];
    view.strides[i] = strides[i];
  }
  const int64_t vectors = Elements(view) / kVec;
  const bool packed = IsPacked(view);
  const Fp8Layout layout = Fp8Layout::For(view, src_heads_major);
  if (type == HalfType::kBFloat16) {
    DequantizeKernel<HalfType::kBFloat16>
        <<<Blocks(vectors), kThreads, 0, stream>>>(src, layout, out, view, packed, vectors, s);
  } else {
    DequantizeKernel<HalfType::kFloat16>
        <<<Blocks(vectors), kThreads, 0, stream>>>(src, layout, out, view, packed, vectors, s);
  }
  return cudaGetLastError();
}

cudaError_t LaunchRecipeUpdate(DeviceScalars* s, float* history, int history_len, bool most_recent,
                               int margin, const fp8_internal::Scalar* chunk_amax, int extra_chunks,
                               cudaStream_t stream) {
  RecipeUpdateKernel<<<1, 32 * kNumFp8Tensors, 0, stream>>>(s, history, history_len, most_recent,
                                                            margin, chunk_amax, extra_chunks);
  return cudaGetLastError();
}

}  // namespace attn::fp8
