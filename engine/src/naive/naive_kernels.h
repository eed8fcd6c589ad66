// Kernels of the `naive` backend, launched from naive_backend.cc. Plain CUDA types only, so
// nvcc never compiles abseil.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace attn {

// Per (b, n) base pointers for the batched GEMMs, one entry per query head: query head n of
// batch b reads K/V head n / group (GQA by pointer, no copy).
struct NaivePointerParams {
  const char* q;  // tensor bases, bytes
  const char* k;
  const char* v;
  char* out;
  float* scores;                          // (B, N, T, S) float32
  int64_t q_batch_stride, q_head_stride;  // elements
  int64_t k_batch_stride, k_head_stride;
  int64_t v_batch_stride, v_head_stride;
  int64_t out_batch_stride, out_head_stride;
  int64_t element_bytes;
  int64_t batch, heads, group, q_len, kv_len;
  const void** q_ptrs;  // [B*N] each
  const void** k_ptrs;
  const void** v_ptrs;
  void** score_ptrs;
  void** out_ptrs;
};

cudaError_t LaunchNaivePointers(const NaivePointerParams& params, cudaStream_t stream);

// Output type of the softmax, written in place over each fp32 score row.
enum class SoftmaxOut { kFloat32, kBFloat16, kFloat16 };

// The masked softmax's rows: `rows` rows of `kv_len` fp32 scores, (B, N, T) of them, row r being
// query t = r % q_len of batch element r / rows_per_batch (rows_per_batch = N * T).
struct SoftmaxParams {
  float* scores;
  int64_t rows, q_len, kv_len, rows_per_batch;
  const int32_t* kv_lens;  // B lengths in device memory (clamped to [0, kv_len]), or null: all
  float scale;
  bool causal;
};

// For each row: multiplies by `scale`, masks keys s >= kv_lens[b] and, when `causal`, s > t
// (VisibleKeys), and replaces the row with its softmax (zeros for a row with no key). Half
// outputs occupy the first half of the row's bytes (row stride 2 * kv_len half elements).
cudaError_t LaunchMaskedSoftmax(const SoftmaxParams& params, SoftmaxOut out, cudaStream_t stream);

}  // namespace attn
