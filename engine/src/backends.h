// Factories of the backends built into this engine (each defined next to its backend).
#pragma once

#include <memory>
#include <string>

#include "attn/backend.h"
#include "attn/registry.h"

namespace attn {

std::unique_ptr<Backend> MakeCpuBackend();
#if ATTN_HAVE_CUDA
std::unique_ptr<Backend> MakeNaiveBackend();
std::unique_ptr<Backend> MakeFusedBackend();
#endif
#if ATTN_HAVE_CUDNN
std::unique_ptr<Backend> MakeCudnnBackend();
std::unique_ptr<Backend> MakeCudnnFp8Backend();
// Forces cudnn_fp8's batch chunks per call (1, 2 or 4 where it divides the batch); 0: its rule.
void SetFp8ChunksOverride(int chunks);
std::string CudnnLibraryVersion();  // "9.19.0", from cudnnGetVersion()
#endif

// Registers every built-in backend, fastest first.
inline void AddBuiltinBackends(BackendRegistry& registry) {
#if ATTN_HAVE_CUDNN
  registry.Add(MakeCudnnBackend());
#endif
#if ATTN_HAVE_CUDA
  registry.Add(MakeFusedBackend());
  registry.Add(MakeNaiveBackend());
#endif
  registry.Add(MakeCpuBackend());
#if ATTN_HAVE_CUDNN
  // Last: FP8 changes results far beyond rounding, so "auto" must never pick it (every problem
  // it takes, cudnn takes first).
  registry.Add(MakeCudnnFp8Backend());
#endif
}

}  // namespace attn
