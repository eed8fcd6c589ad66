// Status-returning checks for CUDA runtime and cuBLAS calls, recording the expression and place.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace attn {

inline absl::Status CudaStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  const absl::StatusCode code = err == cudaErrorMemoryAllocation
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code,
                      absl::StrFormat("CUDA error %s (%s) in %s at %s:%d", cudaGetErrorName(err),
                                      cudaGetErrorString(err), expr, file, line));
}

inline absl::Status CublasStatus(cublasStatus_t err, const char* expr, const char* file, int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = err == CUBLAS_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(
      code, absl::StrFormat("cuBLAS error %s (%s) in %s at %s:%d", cublasGetStatusName(err),
                            cublasGetStatusString(err), expr, file, line));
}

}  // namespace attn

#define ATTN_CUDA_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                     \
    if (absl::Status _s = ::attn::CudaStatus((expr), #expr, __FILE__, __LINE__); !_s.ok()) \
      return _s;                                                                           \
  } while (0)

// After a kernel launch: reports a bad launch configuration without synchronising.
#define ATTN_CUDA_RETURN_IF_LAUNCH_ERROR(what) ATTN_CUDA_RETURN_IF_ERROR(cudaGetLastError())

#define ATTN_CUBLAS_RETURN_IF_ERROR(expr)                                                    \
  do {                                                                                       \
    if (absl::Status _s = ::attn::CublasStatus((expr), #expr, __FILE__, __LINE__); !_s.ok()) \
      return _s;                                                                             \
  } while (0)
