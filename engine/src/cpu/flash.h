// The cpu backend's flash attention: one call's parameters, its blocking, and the kernel that
// computes one task of it (flash_kernels.cc, compiled for every SIMD target Highway knows and
// picked at run time for the CPU it runs on).
//
// A task is one block of query rows of one (batch element, K/V head): the rows are (t, query head
// of the K/V head's group) pairs, t-major, so GQA/MQA heads share every K/V block without copies.
// The task walks the keys in blocks with the online softmax, holding only its block's scores:
// per thread, memory is O(rows per block x (keys per block + head_dim)), never O(T x S).
#pragma once

#include <atomic>
#include <cstdint>

#include "attn/problem.h"
#include "attn/stop.h"
#include "attn/tensor.h"

namespace attn {

// Query rows of one task: up to kFlashMaxRows, a multiple of kFlashRowAlign (the widest SIMD
// vector's floats) so every target's vectors tile a block's rows.
inline constexpr int64_t kFlashRowAlign = 16;
inline constexpr int64_t kFlashMaxRows = 64;

// Keys of one block. Depends on the head dim alone, never on T, S or the batch, so a call cut in
// pieces (or a GQA problem beside its MHA equivalent) walks the same blocks and gives the same
// bits as the whole call.
int64_t FlashKeysPerBlock(int64_t head_dim);

// Floats of one thread's scratch for head dim `head_dim`: Q^T, O^T and the scores of one block,
// and K and V blocks widened to float32 (bfloat16/float16 inputs).
int64_t FlashScratchFloats(int64_t head_dim);

struct FlashCall {
  FlashCall(const AttentionProblem& p, const AttentionTensors& t, const StopToken* stop);

  const AttentionTensors& tensors;
  DType dtype;
  int64_t batch, q_len, kv_len, num_heads, num_kv_heads, head_dim;
  bool causal;
  float scale;
  int64_t group;           // query heads per K/V head
  int64_t rows;            // query rows of one (b, K/V head): q_len * group
  int64_t rows_per_block;  // of a task; a multiple of kFlashRowAlign
  int64_t blocks;          // row blocks of one (b, K/V head)
  int64_t keys_per_block;  // FlashKeysPerBlock(head_dim)
  int64_t tasks;           // batch * num_kv_heads * blocks
  const StopToken* stop;
  std::atomic<bool> stopped{false};  // set by the first task that sees the stop

  // Whether the call must stop: its token's Check() failed here or in another task. Tasks ask
  // before every key block.
  bool ShouldStop();
};

// Computes task `task` of `call` (0 <= task < call.tasks) with `scratch` (FlashScratchFloats
// floats, 64-byte aligned, used by this thread alone): writes its rows of the output, or returns
// early, writing nothing, when the call must stop. Tasks with lower numbers have at least as much
// work (for causal problems, the last row blocks first), so a pool draining them in order
// balances.
void FlashTask(FlashCall& call, int64_t task, float* scratch);

// The SIMD target FlashTask runs with on this CPU ("AVX3", "AVX2", ...).
const char* FlashTarget();

}  // namespace attn
