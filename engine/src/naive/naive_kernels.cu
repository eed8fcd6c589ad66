#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "cuda/from_float.cuh"
#include "naive/naive_kernels.h"
#include "visible_keys.h"

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

// Merges two online-softmax states (running max m, sum of exp(x - m) l).
__device__ void Merge(float& m, float& l, float m2, float l2) {
  const float mx = fmaxf(m, m2);
  if (mx == -INFINITY) return;
  l = l * expf(m - mx) + l2 * expf(m2 - mx);
  m = mx;
}

// Block-wide merge of every thread's (m, l); all threads get the result.
template <int kThreads>
__device__ void BlockMerge(float& m, float& l, float* shared_m, float* shared_l) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
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
}

__device__ void Accumulate(float x, float& m, float& l) {
  if (x > m) {
    l = l * expf(m - x) + 1.f;
    m = x;
  } else {
    l += expf(x - m);
  }
}

// Keys row `row` of `p` sees (VisibleKeys of its batch element's clamped length).
__device__ int64_t RowVisibleKeys(const SoftmaxParams& p, int64_t row) {
  return VisibleKeys(ClampedKvLen(p.kv_lens, row / p.rows_per_batch, p.kv_len), row % p.q_len,
                     p.causal);
}

// One block per row (grid-strided). When the row fits in shared memory (kCached) it is read
// from global memory once: the online max and sum come from that read, the probabilities from
// the cached copy. Otherwise a second pass re-reads the row (from L2 for most sizes); for half
// outputs that pass works in chunks of kThreads with a barrier between the reads and the writes
// of a chunk: chunk c's writes cover float elements below (c + 1) * kThreads / 2, all of which
// were read before, so in-place narrowing never loses a score.
template <int kThreads, bool kCached, typename OutT>
__global__ void __launch_bounds__(kThreads) MaskedSoftmaxKernel(SoftmaxParams p) {
  __shared__ float shared_m[kThreads / 32], shared_l[kThreads / 32];
  extern __shared__ float cached[];  // kv_len floats when kCached
  const int64_t kv_len = p.kv_len;
  const float scale = p.scale;
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    float* in = p.scores + row * kv_len;
    const int64_t visible = RowVisibleKeys(p, row);

    float m = -INFINITY, l = 0.f;
    for (int64_t s = threadIdx.x; s < visible; s += kThreads) {
      const float x = in[s] * scale;
      if constexpr (kCached) cached[s] = x;
      Accumulate(x, m, l);
    }
    BlockMerge<kThreads>(m, l, shared_m, shared_l);
    const float inv_sum = 1.f / l;

    OutT* out = reinterpret_cast<OutT*>(in);
    if constexpr (kCached) {
      // Each thread reads back only what it cached itself, so no barrier is needed before this
      // loop; BlockMerge's barrier already ordered every global read before these writes.
      for (int64_t s = threadIdx.x; s < kv_len; s += kThreads) {
        out[s] = FromFloat<OutT>(s < visible ? expf(cached[s] - m) * inv_sum : 0.f);
      }
    } else {
      for (int64_t base = 0; base < kv_len; base += kThreads) {
        const int64_t s = base + threadIdx.x;
        float prob = 0.f;
        if (s < visible) prob = expf(in[s] * scale - m) * inv_sum;
        if constexpr (sizeof(OutT) < sizeof(float)) __syncthreads();
        if (s < kv_len) out[s] = FromFloat<OutT>(prob);
      }
    }
    __syncthreads();  // shared state is reused by the next row
  }
}

// One warp per row, the whole row in registers: lane `lane` holds float4 vectors j*32 + lane,
// j < kVecs, so a row of up to 128 * kVecs scores is read once (16-byte coalesced loads, all
// issued before the first use), reduced with shuffles only, and written once. Needs kv_len % 4
// == 0 (rows then stay 16-byte aligned). Narrowing to half in place is safe: every lane's loads
// have completed once the max reduction, which consumes them, has finished.
template <int kVecs, typename OutT>
__global__ void __launch_bounds__(128) WarpSoftmaxKernel(SoftmaxParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x * int64_t{4} + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int64_t kv_len = p.kv_len;
  const float scale = p.scale;
  float* in = p.scores + row * kv_len;
  const int64_t visible = RowVisibleKeys(p, row);
  const float4* in4 = reinterpret_cast<const float4*>(in);

  float4 x[kVecs];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t s = 4 * (int64_t{j} * 32 + lane);
    x[j] =
        s < visible ? in4[j * 32 + lane] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  }
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t s = 4 * (int64_t{j} * 32 + lane);
    // Keys past `visible` (kv_lens, causal) or past the row are masked to -inf, hence weight 0.
    x[j].x = s + 0 < visible ? x[j].x * scale : -INFINITY;
    x[j].y = s + 1 < visible ? x[j].y * scale : -INFINITY;
    x[j].z = s + 2 < visible ? x[j].z * scale : -INFINITY;
    x[j].w = s + 3 < visible ? x[j].w * scale : -INFINITY;
    m = fmaxf(m, fmaxf(fmaxf(x[j].x, x[j].y), fmaxf(x[j].z, x[j].w)));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
  if (m == -INFINITY) m = 0.f;  // no visible key: every weight exp(-inf) = 0, the row zeros
  float l = 0.f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    x[j].x = expf(x[j].x - m);
    x[j].y = expf(x[j].y - m);
    x[j].z = expf(x[j].z - m);
    x[j].w = expf(x[j].w - m);
    l += (x[j].x + x[j].y) + (x[j].z + x[j].w);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) l += __shfl_xor_sync(0xffffffffu, l, offset);
  const float inv_sum = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int64_t v = int64_t{j} * 32 + lane;
    if (4 * v >= kv_len) break;
    const float4 p =
        make_float4(x[j].x * inv_sum, x[j].y * inv_sum, x[j].z * inv_sum, x[j].w * inv_sum);
    if constexpr (sizeof(OutT) == sizeof(float)) {
      reinterpret_cast<float4*>(in)[v] = p;
    } else {
      struct alignas(8) Four {
        OutT a, b, c, d;
      };
      reinterpret_cast<Four*>(in)[v] = Four{FromFloat<OutT>(p.x), FromFloat<OutT>(p.y),
                                            FromFloat<OutT>(p.z), FromFloat<OutT>(p.w)};
    }
  }
}

template <int kVecs>
cudaError_t LaunchWarpSoftmax(const SoftmaxParams& p, SoftmaxOut out, cudaStream_t stream) {
  const unsigned grid = static_cast<unsigned>((p.rows + 3) / 4);
  switch (out) {
    case SoftmaxOut::kFloat32:
      WarpSoftmaxKernel<kVecs, float><<<grid, 128, 0, stream>>>(p);
      break;
    case SoftmaxOut::kBFloat16:
      WarpSoftmaxKernel<kVecs, __nv_bfloat16><<<grid, 128, 0, stream>>>(p);
      break;
    case SoftmaxOut::kFloat16:
      WarpSoftmaxKernel<kVecs, __half><<<grid, 128, 0, stream>>>(p);
      break;
  }
  return cudaGetLastError();
}

// Rows up to this many floats are cached in shared memory (48 KiB, the default per-block limit,
// so no opt-in attribute is needed).
constexpr int64_t kMaxCachedRow = 48 * 1024 / sizeof(float);

template <int kThreads, bool kCached>
cudaError_t LaunchSoftmaxCached(const SoftmaxParams& p, SoftmaxOut out, cudaStream_t stream) {
  // Enough blocks to fill any GPU many times over; rows beyond that are grid-strided.
  const unsigned grid = static_cast<unsigned>(p.rows < (1 << 20) ? p.rows : (1 << 20));
  const size_t smem = kCached ? static_cast<size_t>(p.kv_len) * sizeof(float) : 0;
  switch (out) {
    case SoftmaxOut::kFloat32:
      MaskedSoftmaxKernel<kThreads, kCached, float><<<grid, kThreads, smem, stream>>>(p);
      break;
    case SoftmaxOut::kBFloat16:
      MaskedSoftmaxKernel<kThreads, kCached, __nv_bfloat16><<<grid, kThreads, smem, stream>>>(p);
      break;
    case SoftmaxOut::kFloat16:
      MaskedSoftmaxKernel<kThreads, kCached, __half><<<grid, kThreads, smem, stream>>>(p);
      break;
  }
  return cudaGetLastError();
}

template <int kThreads>
cudaError_t LaunchSoftmaxWith(const SoftmaxParams& p, SoftmaxOut out, cudaStream_t stream) {
  if (p.kv_len <= kMaxCachedRow) return LaunchSoftmaxCached<kThreads, true>(p, out, stream);
  return LaunchSoftmaxCached<kThreads, false>(p, out, stream);
}

}  // namespace

cudaError_t LaunchNaivePointers(const NaivePointerParams& params, cudaStream_t stream) {
  const int64_t count = params.batch * params.heads;
  const int threads = 256;
  NaivePointersKernel<<<static_cast<unsigned>((count + threads - 1) / threads), threads, 0,
                        stream>>>(params);
  return cudaGetLastError();
}

cudaError_t LaunchMaskedSoftmax(const SoftmaxParams& p, SoftmaxOut out, cudaStream_t stream) {
  // Rows of up to 4096 scores with kv_len % 4 == 0 live in one warp's registers (at most 32
  // float4 per lane); one read and one write of the row. The block kernels take the rest.
  const int64_t kv_len = p.kv_len;
  if (kv_len % 4 == 0 && p.rows <= (int64_t{1} << 32)) {  // grid = rows / 4 stays below 2^31
    if (kv_len <= 128) return LaunchWarpSoftmax<1>(p, out, stream);
    if (kv_len <= 256) return LaunchWarpSoftmax<2>(p, out, stream);
    if (kv_len <= 512) return LaunchWarpSoftmax<4>(p, out, stream);
    if (kv_len <= 1024) return LaunchWarpSoftmax<8>(p, out, stream);
    if (kv_len <= 2048) return LaunchWarpSoftmax<16>(p, out, stream);
    if (kv_len <= 4096) return LaunchWarpSoftmax<32>(p, out, stream);
  }
  // About four scores per thread in a pass: short rows waste no lanes, long rows keep 256
  // threads streaming.
  if (kv_len <= 128) return LaunchSoftmaxWith<32>(p, out, stream);
  if (kv_len <= 512) return LaunchSoftmaxWith<128>(p, out, stream);
  return LaunchSoftmaxWith<256>(p, out, stream);
}

}  // namespace attn
