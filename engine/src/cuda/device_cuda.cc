// The device layer of a CUDA build: device queries, contexts, allocations and event timing.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstring>
#include <optional>

#include "absl/strings/str_format.h"
#include "attn/device.h"
#include "cuda/check.h"
#include "inputs/fill_kernels.h"
#include "platform.h"
#include "raw_memory.h"

namespace attn {

bool BuiltWithCuda() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return count;
}

absl::Status CudaAvailability() {
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
    cudaGetLastError();
    return absl::NotFoundError("no NVIDIA driver (libcuda) on this machine");
  }
  const auto version = [](int v) { return absl::StrFormat("%d.%d", v / 1000, v % 1000 / 10); };
  if (driver < CUDART_VERSION) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the NVIDIA driver supports CUDA %s, but attn was built with the CUDA %s runtime: install "
        "a driver for CUDA %s or newer (R580+ for CUDA 13), or run an image built for CUDA %s",
        version(driver), version(CUDART_VERSION), version(CUDART_VERSION), version(driver)));
  }
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    if (e == cudaErrorNoDevice) return absl::NotFoundError("no CUDA device on this machine");
    return absl::FailedPreconditionError(
        absl::StrFormat("CUDA cannot enumerate devices: %s (%s); check the driver and the "
                        "container's GPU access (nvidia.com/gpu limit, device plugin)",
                        cudaGetErrorString(e), cudaGetErrorName(e)));
  }
  if (count == 0) return absl::NotFoundError("no CUDA device on this machine");
  return absl::OkStatus();
}

absl::StatusOr<DeviceInfo> QueryCudaDevice(int ordinal) {
  const int count = CudaDeviceCount();
  if (ordinal < 0 || ordinal >= count) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "device: CUDA device %d does not exist; this machine has %d", ordinal, count));
  }
  cudaDeviceProp prop;
  ATTN_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.kind = DeviceKind::kCuda;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.total_memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.multiprocessors = prop.multiProcessorCount;
  info.shared_memory_per_block = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  info.shared_memory_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  ATTN_CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&info.cuda_runtime_version));
  ATTN_CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&info.cuda_driver_version));
  if (const std::optional<DeviceCap> cap = DeviceCapOverride()) return CappedDeviceInfo(info, *cap);
  return info;
}

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::CreateCuda(
    int ordinal, const DeviceContextOptions& options) {
  auto info = QueryCudaDevice(ordinal);
  if (!info.ok()) return info.status();
  std::unique_ptr<DeviceContext> ctx(new DeviceContext());
  ctx->info_ = *std::move(info);
  ATTN_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  ATTN_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  ATTN_CUBLAS_RETURN_IF_ERROR(cublasCreate(&ctx->cublas_));
  ATTN_CUBLAS_RETURN_IF_ERROR(cublasSetStream(ctx->cublas_, ctx->stream_));
  for (cudaEvent_t& mark : ctx->marks_) {
    ATTN_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
  }
  auto arena = Arena::Create(MemoryKind::kDevice, options.arena_bytes);
  if (!arena.ok()) return arena.status();
  ctx->arena_ = *std::move(arena);
  return ctx;
}

DeviceContext::~DeviceContext() {
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  states_.clear();  // backend handles may reference the stream
  arena_.reset();   // before the stream goes, so no queued kernel outlives its memory
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  for (cudaEvent_t mark : marks_) {
    if (mark != nullptr) cudaEventDestroy(mark);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status DeviceContext::MakeCurrent() {
  if (info_.kind != DeviceKind::kCuda) return absl::OkStatus();
  ATTN_CUDA_RETURN_IF_ERROR(cudaSetDevice(info_.ordinal));
  return absl::OkStatus();
}

absl::Status DeviceContext::Synchronize() {
  if (stream_ == nullptr) return absl::OkStatus();
  ATTN_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

absl::Status DeviceContext::MarkQueued(int slot) {
  if (stream_ == nullptr) return absl::OkStatus();
  ATTN_CUDA_RETURN_IF_ERROR(cudaEventRecord(marks_[slot & 1], stream_));
  return absl::OkStatus();
}

absl::Status DeviceContext::WaitForMark(int slot) {
  if (stream_ == nullptr) return absl::OkStatus();
  ATTN_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(marks_[slot & 1]));
  return absl::OkStatus();
}

bool DeviceContext::Capturing() const {
  if (stream_ == nullptr) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

absl::Status DeviceContext::CopyToDevice(void* dst, const void* src, int64_t bytes) {
  if (stream_ == nullptr) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  ATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
  return Synchronize();
}

absl::Status DeviceContext::CopyToHost(void* dst, const void* src, int64_t bytes) {
  if (stream_ == nullptr) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  }
  ATTN_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
  return Synchronize();
}

absl::StatusOr<void*> AllocateDeviceMemory(int64_t bytes) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(absl::StrFormat(
        "cudaMalloc of %d bytes failed (%s); the device has %d of %d bytes free: lower the arena "
        "size",
        bytes, cudaGetErrorString(err), free_bytes, total_bytes));
  }
  return p;
}

void FreeDeviceMemory(void* p) { cudaFree(p); }

absl::StatusOr<std::vector<double>> TimeOnStream(CudaStream stream,
                                                 const std::function<absl::Status()>& work,
                                                 int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) {
    if (auto s = work(); !s.ok()) return s;
  }
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(repeats), nullptr);
  absl::Status status;
  for (auto& e : events) {
    if (status = CudaStatus(cudaEventCreate(&e), "cudaEventCreate", __FILE__, __LINE__);
        !status.ok())
      break;
  }
  for (int i = 0; status.ok() && i < repeats; ++i) {
    status =
        CudaStatus(cudaEventRecord(events[2 * i], stream), "cudaEventRecord", __FILE__, __LINE__);
    if (status.ok()) status = work();
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(events[2 * i + 1], stream), "cudaEventRecord", __FILE__,
                          __LINE__);
    }
  }
  if (status.ok()) {
    status = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize", __FILE__, __LINE__);
  }
  std::vector<double> ms;
  for (int i = 0; status.ok() && i < repeats; ++i) {
    float elapsed = 0;
    status = CudaStatus(cudaEventElapsedTime(&elapsed, events[2 * i], events[2 * i + 1]),
                        "cudaEventElapsedTime", __FILE__, __LINE__);
    ms.push_back(elapsed);
  }
  for (auto e : events) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (!status.ok()) return status;
  return ms;
}

absl::Status FillNormalOnStream(CudaStream stream, void* dst, int64_t count, DType dtype,
                                uint64_t seed, std::optional<DType> rounded_to) {
  const auto fill_type = [](DType d) {
    return d == DType::kFloat32    ? FillType::kFloat32
           : d == DType::kBFloat16 ? FillType::kBFloat16
                                   : FillType::kFloat16;
  };
  if (rounded_to && *rounded_to != dtype && dtype != DType::kFloat32) {
    return absl::InvalidArgumentError("FillNormalOnStream: a widened copy is stored as float32");
  }
  ATTN_CUDA_RETURN_IF_ERROR(LaunchNormalFill(dst, count, fill_type(dtype),
                                             fill_type(rounded_to.value_or(dtype)), seed, stream));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> TimeGraphOnStream(CudaStream stream,
                                                      const std::function<absl::Status()>& work,
                                                      int calls_per_replay, int replays) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ATTN_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  absl::Status captured;
  for (int i = 0; captured.ok() && i < calls_per_replay; ++i) captured = work();
  // End the capture whatever happened, so the stream is usable again.
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (!captured.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return captured;
  }
  ATTN_CUDA_RETURN_IF_ERROR(ended);
  // (No StatusOr is ever made from an OK status: abseil aborts on that in debug builds.)
  absl::StatusOr<std::vector<double>> per_replay = absl::InternalError("graph replay did not run");
  absl::Status status =
      CudaStatus(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate", __FILE__, __LINE__);
  // One untimed launch uploads the graph.
  if (status.ok()) {
    status = CudaStatus(cudaGraphLaunch(exec, stream), "cudaGraphLaunch", __FILE__, __LINE__);
  }
  if (status.ok()) {
    per_replay = TimeOnStream(
        stream,
        [&] {
          return CudaStatus(cudaGraphLaunch(exec, stream), "cudaGraphLaunch", __FILE__, __LINE__);
        },
        0, replays);
  } else {
    per_replay = status;
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (!per_replay.ok()) return per_replay.status();
  for (double& ms : *per_replay) ms /= calls_per_replay;
  return per_replay;
}

}  // namespace attn
