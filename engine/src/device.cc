#include "attn/device.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <thread>

#include "absl/strings/str_format.h"
#include "raw_memory.h"

namespace attn {

std::string DeviceInfo::ToString() const {
  if (kind == DeviceKind::kCpu) return name;
  return absl::StrFormat("cuda:%d %s (sm_%d%d, %.1f GiB, %d SMs)", ordinal, name, cc_major,
                         cc_minor, static_cast<double>(total_memory_bytes) / (1 << 30),
                         multiprocessors);
}

namespace {

// The limits of a device cap (DeviceCap, attn/device.h).
struct CapLimits {
  int cc_major, cc_minor;
  int64_t shared_memory_per_block, shared_memory_per_sm;
  int multiprocessors;
};

constexpr CapLimits LimitsOf(DeviceCap cap) {
  switch (cap) {
    case DeviceCap::kSm89:  // NVIDIA L4
      return {8, 9, 99 * 1024, 100 * 1024, 58};
  }
  return {0, 0, 0, 0, 0};
}

// -1: no cap; otherwise the DeviceCap SetDeviceCapOverride set.
std::atomic<int> device_cap{-1};

}  // namespace

void SetDeviceCapOverride(std::optional<DeviceCap> cap) {
  device_cap.store(cap ? static_cast<int>(*cap) : -1, std::memory_order_relaxed);
}

std::optional<DeviceCap> DeviceCapOverride() {
  const int cap = device_cap.load(std::memory_order_relaxed);
  return cap < 0 ? std::nullopt : std::optional(static_cast<DeviceCap>(cap));
}

DeviceInfo CappedDeviceInfo(DeviceInfo device, DeviceCap cap) {
  if (device.kind != DeviceKind::kCuda) return device;
  const CapLimits limits = LimitsOf(cap);
  if (device.ComputeCapability() > limits.cc_major * 10 + limits.cc_minor) {
    device.cc_major = limits.cc_major;
    device.cc_minor = limits.cc_minor;
  }
  device.shared_memory_per_block =
      std::min(device.shared_memory_per_block, limits.shared_memory_per_block);
  device.shared_memory_per_sm = std::min(device.shared_memory_per_sm, limits.shared_memory_per_sm);
  device.multiprocessors = std::min(device.multiprocessors, limits.multiprocessors);
  device.name += absl::StrFormat(" [capped at %s]", DeviceCapName(cap));
  return device;
}

DeviceInfo CpuDeviceInfo() {
  DeviceInfo info;
  info.kind = DeviceKind::kCpu;
  info.multiprocessors = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  info.name = absl::StrFormat("cpu (%d threads)", info.multiprocessors);
  return info;
}

absl::StatusOr<std::unique_ptr<DeviceContext>> DeviceContext::CreateCpu(
    const DeviceContextOptions& options) {
  std::unique_ptr<DeviceContext> ctx(new DeviceContext());
  ctx->info_ = CpuDeviceInfo();
  auto arena = Arena::Create(MemoryKind::kHost, options.arena_bytes);
  if (!arena.ok()) return arena.status();
  ctx->arena_ = *std::move(arena);
  return ctx;
}

absl::StatusOr<BackendState*> DeviceContext::GetBackendState(
    const void* owner, const std::function<absl::StatusOr<std::unique_ptr<BackendState>>()>& make) {
  std::lock_guard<std::mutex> lock(states_mu_);
  auto it = states_.find(owner);
  if (it != states_.end()) return it->second.get();
  auto state = make();
  if (!state.ok()) return state.status();
  BackendState* raw = state->get();
  states_.emplace(owner, *std::move(state));
  return raw;
}

absl::StatusOr<void*> AllocateHostMemory(int64_t bytes) {
  void* p =
      ::operator new(static_cast<size_t>(bytes), std::align_val_t(Arena::kAlignment), std::nothrow);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("host allocation of %d bytes failed; lower the arena size", bytes));
  }
  return p;
}

void FreeHostMemory(void* p) { ::operator delete(p, std::align_val_t(Arena::kAlignment)); }

}  // namespace attn
