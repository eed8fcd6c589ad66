#include "cudnn/seq_lens.h"
#include "visible_keys.h"

namespace attn {
namespace {

__global__ void SeqLensKernel(const int32_t* kv_lens, int64_t batch, int32_t q_len, int64_t kv_len,
                              int32_t* seq_len_q, int32_t* seq_len_kv) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    seq_len_q[b] = q_len;
    seq_len_kv[b] = static_cast<int32_t>(ClampedKvLen(kv_lens, b, kv_len));
  }
}

}  // namespace

cudaError_t LaunchSeqLens(const int32_t* kv_lens, int64_t batch, int64_t q_len, int64_t kv_len,
                          int32_t* seq_len_q, int32_t* seq_len_kv, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks = (batch + kThreads - 1) / kThreads;
  SeqLensKernel<<<static_cast<unsigned>(blocks < 1024 ? blocks : 1024), kThreads, 0, stream>>>(
      kv_lens, batch, static_cast<int32_t>(q_len), kv_len, seq_len_q, seq_len_kv);
  return cudaGetLastError();
}

}  // namespace attn
