// ATTN_HOST_DEVICE: marks a function nvcc compiles for both the host and the device, and the
// host compiler for the host alone, so one definition serves kernels and host code.
#pragma once

#if defined(__CUDACC__)
#define ATTN_HOST_DEVICE __host__ __device__
#else
#define ATTN_HOST_DEVICE
#endif
