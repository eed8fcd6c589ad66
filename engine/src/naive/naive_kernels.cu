#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "naive/naive_kernels.h"

namespace attn {
namespace {

__global__ void NaivePointersKernel(NaivePointerParams p) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= p.batch * p.heads) return;
  const int64_t b = i / p.heads, n = i % p.heads, kh = n / p.group;
  const int64_t e = p.element_bytes;
  p.q_ptrs[i] = p.q + (b * p.q_batch_stride + n * p.q_head_stride) * e;
  p.k_ptrs[i] = p.k + (b * p.k_batch_stride + kh * p.k_head_stride) * e;
  p.v_ptrs[i] = p.v + (b * p.v_batch_stride + kh * p.v_head_stride) * e;
  p.score_ptrs[i] = p.scores + i * p.q_len * p.kv_len;
  p.out_ptrs[i] = p.out + (b * p.out_batch_stride + n * p.out_head_stride) * e;
}

template <typename T>
__device__ T FromFloat(float x);
template <>
__device__ float FromFloat<float>(float x) { return x; }
template <>
__device__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __half FromFloat<__half>(float x) { return __float2half_rn(x); }

// Merges two online-softmax states (running max m, sum of exp(x - m) l).
__device__ void Merge(float& m, float& l, float m2, float l2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  l = l * expf(m - mx) + l2 * expf(m2 - mx);
  m = mx;
}

// One block per row (grid-strided). Pass 1 reads the visible scores once, keeping an online
// max and sum; pass 2 reads them again (from L2 for rows of this size) and writes the
// probabilities. For half outputs pass 2 works in chunks of kThreads with a barrier between the
// reads and the writes of a chunk: chunk c's writes cover float elements below (c + 1) *
// kThreads / 2, all of which were read before, so in-place narrowing never loses a score.
template <int kThreads, typename OutT>
__global__ void __launch_bounds__(kThreads)
    MaskedSoftmaxKernel(float* scores, int64_t rows, int64_t q_len, int64_t kv_len, float scale,
                        bool causal) {
  __shared__ float shared_m[kThreads / 32], shared_l[kThreads / 32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    float* in = scores + row * kv_len;
    const int64_t t = row % q_len;
    const int64_t visible = causal ? min(kv_len, t + 1) : kv_len;

    float m = -INFINITY, l = 0.f;
    for (int64_t s = threadIdx.x; s < visible; s += kThreads) {
      const float x = in[s] * scale;
      if (x > m) {
        l = l * expf(m - x) + 1.f;
        m = x;
      } else {
        l += expf(x - m);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      Merge(m, l, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, l, offset));
    }
    if (lane == 0) {
      shared_m[warp] = m;
      shared_l[warp] = l;
    }
    __syncthreads();
    m = shared_m[0];
    l = shared_l[0];
    for (int w = 1; w < kThreads / 32; ++w) Merge(m, l, shared_m[w], shared_l[w]);
    const float inv_sum = 1.f / l;

    OutT* out = reinterpret_cast<OutT*>(in);
    for (int64_t base = 0; base < kv_len; base += kThreads) {
      const int64_t s = base + threadIdx.x;
      float p = 0.f;
      if (s < visible) p = expf(in[s] * scale - m) * inv_sum;
      if constexpr (sizeof(OutT) < sizeof(float)) __syncthreads();
      if (s < kv_len) out[s] = FromFloat<OutT>(p);
    }
    __syncthreads();  // shared_m/l and the row are reused by the next row
  }
}

template <int kThreads>
cudaError_t LaunchSoftmaxWith(float* scores, int64_t rows, int64_t q_len, int64_t kv_len,
                              float scale, bool causal, SoftmaxOut out, cudaStream_t stream) {
  // Enough blocks to fill any GPU many times over; rows beyond that are grid-strided.
  const unsigned grid = static_cast<unsigned>(rows < (1 << 20) ? rows : (1 << 20));
  switch (out) {
    case SoftmaxOut::kFloat32:
      MaskedSoftmaxKernel<kThreads, float>
          <<<grid, kThreads, 0, stream>>>(scores, rows, q_len, kv_len, scale, causal);
      break;
    case SoftmaxOut::kBFloat16:
      MaskedSoftmaxKernel<kThreads, __nv_bfloat16>
          <<<grid, kThreads, 0, stream>>>(scores, rows, q_len, kv_len, scale, causal);
      break;
    case SoftmaxOut::kFloat16:
      MaskedSoftmaxKernel<kThreads, __half>
          <<<grid, kThreads, 0, stream>>>(scores, rows, q_len, kv_len, scale, causal);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchNaivePointers(const NaivePointerParams& params, cudaStream_t stream) {
  const int64_t count = params.batch * params.heads;
  const int threads = 256;
  NaivePointersKernel<<<static_cast<unsigned>((count + threads - 1) / threads), threads, 0,
                        stream>>>(params);
  return cudaGetLastError();
}

cudaError_t LaunchMaskedSoftmax(float* scores, int64_t rows, int64_t q_len, int64_t kv_len,
                                float scale, bool causal, SoftmaxOut out, cudaStream_t stream) {
  // About four scores per thread in a pass: short rows waste no lanes, long rows keep 256
  // threads streaming.
  if (kv_len <= 128) return LaunchSoftmaxWith<32>(scores, rows, q_len, kv_len, scale, causal, out, stream);
  if (kv_len <= 512) return LaunchSoftmaxWith<128>(scores, rows, q_len, kv_len, scale, causal, out, stream);
  return LaunchSoftmaxWith<256>(scores, rows, q_len, kv_len, scale, causal, out, stream);
}

}  // namespace attn
