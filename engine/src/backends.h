// Factories of the backends built into this engine, each defined next to its backend; backends.cc
// registers them in BackendRegistry::Default().
#pragma once

#include <memory>
#include <string>

#include "attn/backend.h"

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

}  // namespace attn
