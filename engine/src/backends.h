// Factories of the backends built into this engine (each defined next to its backend).
#pragma once

#include <memory>
#include <string>

#include "attn/backend.h"
#include "attn/registry.h"

namespace attn {

std::unique_ptr<Backend> MakeCpuBackend();
std::unique_ptr<Backend> MakeReferenceBackend();
#if ATTN_HAVE_CUDA
std::unique_ptr<Backend> MakeNaiveBackend();
std::unique_ptr<Backend> MakeFusedBackend();
#endif
#if ATTN_HAVE_CUDNN
std::unique_ptr<Backend> MakeCudnnBackend();
std::unique_ptr<Backend> MakeCudnnFp8Backend();
std::string CudnnLibraryVersion();  // "9.19.0", from cudnnGetVersion()
#endif

// A backend of the project that this build left out: listed, named and described like the
// others, and every verdict is Unsupported with `reason` ("cudnn: needs a CUDA device; this
// engine was built without CUDA"), so a request for it is answered as unsupported, not as an
// unknown name.
std::unique_ptr<Backend> MakeUnavailableBackend(std::string name, std::string description,
                                                std::string reason);

// Registers every backend of the project, fastest first: the built ones, and the others as
// unavailable.
inline void AddBuiltinBackends(BackendRegistry& registry) {
#if ATTN_HAVE_CUDA
  const char* no_cudnn = "cudnn: this engine was built without cuDNN";
  const char* no_cudnn_fp8 = "cudnn_fp8: this engine was built without cuDNN";
#else
  const char* no_cudnn = "cudnn: needs a CUDA device; this engine was built without CUDA";
  const char* no_cudnn_fp8 = "cudnn_fp8: needs a CUDA device; this engine was built without CUDA";
#endif
#if ATTN_HAVE_CUDNN
  (void)no_cudnn;
  (void)no_cudnn_fp8;
  registry.Add(MakeCudnnBackend());
#else
  registry.Add(
      MakeUnavailableBackend("cudnn", "cuDNN fused flash attention (SDPA forward)", no_cudnn));
#endif
#if ATTN_HAVE_CUDA
  registry.Add(MakeFusedBackend());
  registry.Add(MakeNaiveBackend());
#else
  registry.Add(
      MakeUnavailableBackend("fused", "our flash-attention kernel",
                             "fused: needs a CUDA device; this engine was built without CUDA"));
  registry.Add(
      MakeUnavailableBackend("naive", "cuBLAS GEMM + softmax kernel + GEMM",
                             "naive: needs a CUDA device; this engine was built without CUDA"));
#endif
  registry.Add(MakeCpuBackend());
  // After cpu, which runs every problem it runs: "auto" never picks the float64 reference.
  registry.Add(MakeReferenceBackend());
  // Last: FP8 changes results far beyond rounding, so "auto" must never pick it (every problem
  // it takes, cudnn takes first).
#if ATTN_HAVE_CUDNN
  registry.Add(MakeCudnnFp8Backend());
#else
  registry.Add(MakeUnavailableBackend("cudnn_fp8", "cuDNN FP8 fused attention (sdpa_fp8 forward)",
                                      no_cudnn_fp8));
#endif
}

}  // namespace attn
