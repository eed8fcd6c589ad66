// The `cudnn` backend's one kernel: the (B, 1, 1, 1) int32 sequence-length tensors cuDNN's
// padding mask reads. Plain CUDA types only, so nvcc never compiles abseil or cudnn-frontend.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attn {

// seq_len_q[b] = q_len and seq_len_kv[b] = kv_lens[b] clamped to [0, kv_len] (ClampedKvLen: a
// length beyond S would make cuDNN read past K and V), for b < batch, on `stream`.
cudaError_t LaunchSeqLens(const int32_t* kv_lens, int64_t batch, int64_t q_len, int64_t kv_len,
                          int32_t* seq_len_q, int32_t* seq_len_kv, cudaStream_t stream);

}  // namespace attn
