// The device layer of a build without CUDA: no GPUs, host memory only.
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_format.h"
#include "attn/arena.h"
#include "attn/device.h"
#include "platform.h"
#include "raw_memory.h"

namespace attn {
namespace {
constexpr const char* kNoCuda =
    "this attn build has no CUDA support; rebuild with -DATTN_ENABLE_CUDA=ON on a machine with the "
    "CUDA toolkit";
}  // namespace

bool BuiltWithCuda() { return false; }
int CudaDeviceCount() { return 0; }

absl::Status CudaAvailability() { return absl::NotFoundError(kNoCuda); }

absl::StatusOr<DeviceInfo> QueryCudaDevice(int) { return absl::FailedPreconditionError(kNoCuda); }

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::CreateCuda(
    int, const DeviceContextOptions&) {
  return absl::FailedPreconditionError(kNoCuda);
}

DeviceContext::~DeviceContext() = default;

absl::Status DeviceContext::MakeCurrent() { return absl::OkStatus(); }

absl::Status DeviceContext::Synchronize() { return absl::OkStatus(); }

absl::Status DeviceContext::MarkQueued(int) { return absl::OkStatus(); }
absl::Status DeviceContext::WaitForMark(int) { return absl::OkStatus(); }
bool DeviceContext::Capturing() const { return false; }

absl::Status DeviceContext::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status DeviceContext::CopyToHost(void* dst, const void* src, int64_t bytes) {
  std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::StatusOr<void*> AllocateDeviceMemory(int64_t) {
  return absl::FailedPreconditionError(kNoCuda);
}
void FreeDeviceMemory(void*) {}

absl::StatusOr<std::vector<double>> TimeOnStream(CudaStream, const std::function<absl::Status()>&,
                                                 int, int) {
  return absl::FailedPreconditionError(kNoCuda);
}

absl::Status FillNormalOnStream(CudaStream, void*, int64_t, DType, uint64_t, std::optional<DType>) {
  return absl::FailedPreconditionError(kNoCuda);
}

absl::StatusOr<std::vector<double>> TimeGraphOnStream(CudaStream,
                                                      const std::function<absl::Status()>&, int,
                                                      int) {
  return absl::FailedPreconditionError(kNoCuda);
}

}  // namespace attn
