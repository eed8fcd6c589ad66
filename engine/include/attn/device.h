// Devices the engine can run on, and the per-device state it keeps for their lifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "attn/arena.h"

// Opaque CUDA handle types, so this header needs no CUDA headers (CPU-only builds include it).
struct CUstream_st;
struct cublasContext;
struct CUevent_st;

namespace attn {

using CudaStream = CUstream_st*;      // cudaStream_t
using CublasHandle = cublasContext*;  // cublasHandle_t

enum class DeviceKind : uint8_t { kCpu, kCuda };

// What backends need to know about a device to judge support.
struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  int ordinal = -1;  // CUDA device ordinal; -1 for the CPU
  std::string name;  // "NVIDIA H200", or "cpu (16 threads)"
  int cc_major = 0;  // compute capability; 0 on the CPU
  int cc_minor = 0;
  int64_t total_memory_bytes = 0;
  int multiprocessors = 0;  // SMs, or CPU threads
  // Shared memory a block may use (its opt-in maximum) and an SM holds; 0 on the CPU. Kernels
  // that size their tiles by it (fused split-KV) read these: 227/228 KiB on H100/H200, 99/100
  // KiB on the L4.
  int64_t shared_memory_per_block = 0;
  int64_t shared_memory_per_sm = 0;
  int cuda_runtime_version = 0;  // e.g. 13000; 0 on the CPU
  int cuda_driver_version = 0;   // highest CUDA version the driver supports, e.g. 13000

  int ComputeCapability() const { return cc_major * 10 + cc_minor; }  // 90 for sm_90
  std::string ToString() const;
};

// True when the engine was built with CUDA support.
bool BuiltWithCuda();

// Number of usable CUDA devices: 0 without a driver, a GPU, or CUDA support in the build.
int CudaDeviceCount();

// Why CUDA cannot be used here, or OK when at least one device can. NotFound: no CUDA in the
// build, no driver or no device (a CPU machine; serving on the cpu backend is expected).
// FailedPrecondition: a driver and GPU are there but unusable, e.g. a driver older than the
// CUDA runtime this build needs, with what to install.
absl::Status CudaAvailability();

// The cuDNN library's version ("9.19.0"), or empty when the build has no cuDNN.
std::string CudnnVersion();

// Devices the dispatch can be capped at (SetDeviceCapOverride). kSm89: an NVIDIA L4 (Ada), the
// workshop's GPU: compute capability 8.9, 99 KiB of shared memory a block (opt-in) and 100 KiB
// an SM (the CUDA programming guide's limits for 8.9), 58 SMs.
enum class DeviceCap { kSm89 };
inline constexpr DeviceCap kDeviceCaps[] = {DeviceCap::kSm89};

// "sm_89": the name attn-bench's and attn_engine_tests' --device_cap take.
constexpr std::string_view DeviceCapName(DeviceCap cap) {
  switch (cap) {
    case DeviceCap::kSm89:
      return "sm_89";
  }
  return "";
}
// The cap DeviceCapName calls `name`, or nullopt.
constexpr std::optional<DeviceCap> DeviceCapNamed(std::string_view name) {
  for (DeviceCap cap : kDeviceCaps) {
    if (DeviceCapName(cap) == name) return cap;
  }
  return std::nullopt;
}

// Caps what the engine is told of every CUDA device described after the call (QueryCudaDevice,
// so every DeviceContext made later) at `cap`: each limit the backends' support rules and
// heuristics read (compute capability, shared memory a block and an SM, SMs) becomes the lower
// of the device's and the cap's, and the name says so ("NVIDIA H100 80GB HBM3 [capped at
// sm_89]"); memory and versions stay the device's (CappedDeviceInfo below). So an
// sm_89 build, run on a Hopper GPU by the driver's JIT from its PTX, takes the paths an L4 takes:
// cudnn with head dims <= 128, the fused backend's mma.sync and cp.async split-KV kernels (no
// wgmma, no TMA), cudnn_fp8 refused. What the cap cannot change: the kernels run on the real
// device, and cuDNN and cuBLAS choose their own kernels by it. Contexts made before keep what
// they were told: call it first.
void SetDeviceCapOverride(std::optional<DeviceCap> cap);
// The cap SetDeviceCapOverride set, if any.
std::optional<DeviceCap> DeviceCapOverride();

// Describes CUDA device `ordinal` without creating a context on it; capped at the device cap set
// by SetDeviceCapOverride, if any.
absl::StatusOr<DeviceInfo> QueryCudaDevice(int ordinal);

// `device` capped at `cap` (SetDeviceCapOverride says what changes); a CPU is left as it is.
DeviceInfo CappedDeviceInfo(DeviceInfo device, DeviceCap cap);

// Describes this machine's CPU as a device.
DeviceInfo CpuDeviceInfo();

// What a backend keeps per device (library handles, plan caches); owned by the DeviceContext
// and destroyed before its stream.
class BackendState {
 public:
  virtual ~BackendState() = default;
};

struct DeviceContextOptions {
  int64_t arena_bytes = int64_t{1} << 30;  // device (or host, for the CPU) arena, made once
};

// Everything one device keeps alive between calls: its stream, cuBLAS handle and memory arena.
// Created once at start-up; backends run on it. Not copyable. Calls
// on one context are serialised on its stream; use one context per worker for concurrency.
class DeviceContext {
 public:
  // A context on CUDA device `ordinal`: sets the device, creates a non-blocking stream and a
  // cuBLAS handle bound to it, allocates the arena. FailedPrecondition when
  // the build has no CUDA or the device is absent; ResourceExhausted when the arena does not fit.
  static absl::StatusOr<std::unique_ptr<DeviceContext>> CreateCuda(
      int ordinal, const DeviceContextOptions& options = {});

  // A context for the CPU: a host arena; no stream, no handles.
  static absl::StatusOr<std::unique_ptr<DeviceContext>> CreateCpu(
      const DeviceContextOptions& options = {});

  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  const DeviceInfo& info() const { return info_; }
  MemoryKind memory() const {
    return info_.kind == DeviceKind::kCuda ? MemoryKind::kDevice : MemoryKind::kHost;
  }
  Arena& arena() { return *arena_; }
  CudaStream stream() const { return stream_; }
  CublasHandle cublas() const { return cublas_; }

  // The state `owner` (a backend) keeps on this device, made by `make` on first use and kept
  // until the context goes. Thread-safe; a failed `make` is returned and retried next time.
  absl::StatusOr<BackendState*> GetBackendState(
      const void* owner,
      const std::function<absl::StatusOr<std::unique_ptr<BackendState>>()>& make);

  // Makes this context's GPU the calling thread's current CUDA device (nothing on the CPU). The
  // handles a backend makes on first use (cuDNN's, its streams) and every kernel launch follow
  // the current device, which a new thread starts at 0: a thread other than the creating one
  // calls this before its first call on the context.
  absl::Status MakeCurrent();

  // Waits for all work queued on the stream; reports a device error if one occurred.
  absl::Status Synchronize();

  // Two marks in the stream's queue, so a long call run in pieces can wait for an earlier piece
  // while the next one is queued: MarkQueued(slot) marks the work queued so far (slot 0 or 1),
  // WaitForMark(slot) blocks until that work has finished. No-ops on the CPU context.
  absl::Status MarkQueued(int slot);
  absl::Status WaitForMark(int slot);
  // True while the stream is being captured into a CUDA graph: nothing may wait on it then.
  bool Capturing() const;

  // Copies between host and this context's memory on its stream, then waits.
  absl::Status CopyToDevice(void* dst, const void* src, int64_t bytes);
  absl::Status CopyToHost(void* dst, const void* src, int64_t bytes);

 private:
  DeviceContext() = default;

  DeviceInfo info_;
  std::unique_ptr<Arena> arena_;
  CudaStream stream_ = nullptr;
  CublasHandle cublas_ = nullptr;
  CUevent_st* marks_[2] = {nullptr, nullptr};  // cudaEvent_t, made with the stream
  std::mutex states_mu_;
  std::map<const void*, std::unique_ptr<BackendState>> states_;
};

}  // namespace attn
