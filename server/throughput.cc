#include "server/throughput.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "attn/timing.h"

namespace attn::server {
namespace {

// Calibration problems: big enough to run at a useful fraction of the rate large calls get,
// small enough to take milliseconds: a GPU problem of 34 GFLOP with 256 MiB of naive workspace;
// on the host 1.1 GFLOP for the cpu backend (~6 ms on 2 cores) and 34 MFLOP for the float64
// reference (~10 ms).
AttentionProblem GpuCalibration(DType dtype) {
  return AttentionProblem::SelfAttention(2, 2048, 8, 128, dtype);
}
AttentionProblem CpuCalibration(DType dtype) {
  return AttentionProblem::SelfAttention(1, 1024, 4, 64, dtype);
}
AttentionProblem ReferenceCalibration() {
  return AttentionProblem::SelfAttention(1, 256, 2, 64, DType::kFloat32);
}

// The median of three timed calls after one untimed one, in seconds; <= 0 when it cannot run.
double TimeCall(const Backend& backend, const AttentionProblem& p, DeviceContext& context) {
  auto buffers = AllocatePacked(p, context);
  if (!buffers.ok() || !FillInputs(context, p, buffers->tensors, 1).ok()) return 0;
  auto ms = TimeOnDevice(
      context, [&] { return RunAttention(backend, p, buffers->tensors, context); }, 1, 3);
  if (!ms.ok()) return 0;
  return Summarize(*ms).median / 1e3;
}

double MeasureCopy(DeviceContext& context) {
  constexpr int64_t kBytes = int64_t{32} << 20;
  auto a = context.arena().Allocate(kBytes), b = context.arena().Allocate(kBytes);
  if (!a.ok() || !b.ok()) return 0;
  // Timed as an "attention call" of the copy: read kBytes, write kBytes.
  auto ms = TimeOnDevice(
      context,
      [&] {
        if (context.info().kind == DeviceKind::kCuda) {
          return FillNormal(context, a->data(), kBytes / 4, DType::kFloat32, 0);
        }
        std::copy_n(static_cast<const char*>(b->data()), kBytes, static_cast<char*>(a->data()));
        return absl::OkStatus();
      },
      1, 3);
  if (!ms.ok()) return 0;
  const double bytes = context.info().kind == DeviceKind::kCuda ? kBytes : 2.0 * kBytes;
  return bytes / (Summarize(*ms).median / 1e3);
}

}  // namespace

Throughputs Throughputs::Measure(DeviceContext& context) {
  Throughputs t;
  const BackendRegistry& registry = BackendRegistry::Default();
  if (context.info().kind == DeviceKind::kCuda) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      const AttentionProblem p = GpuCalibration(dtype);
      for (const auto& v : registry.Verdicts(p, context.info())) {
        if (!v.support.ok()) continue;
        if (const double s = TimeCall(*v.backend, p, context); s > 0) {
          t.flops_[{v.backend->name(), dtype}] = AttentionFlops(p) / s;
        }
      }
    }
  }
  // The host backends: cpu and reference are a CPU server's own backends; the reference is also
  // every server's numerics check (its rate prices the check in admission).
  DeviceContextOptions host_options;
  host_options.arena_bytes = int64_t{64} << 20;
  if (auto host = DeviceContext::CreateCpu(host_options); host.ok()) {
    const bool serves_host = context.info().kind == DeviceKind::kCpu;
    if (serves_host) {
      const Backend& cpu = *registry.Find("cpu");
      for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
        const AttentionProblem p = CpuCalibration(dtype);
        if (const double s = TimeCall(cpu, p, **host); s > 0) {
          t.flops_[{"cpu", dtype}] = AttentionFlops(p) / s;
        }
      }
    }
    const AttentionProblem p = ReferenceCalibration();
    if (const double s = TimeCall(*registry.Find("reference"), p, **host); s > 0) {
      t.host_reference_ = AttentionFlops(p) / s;
      if (serves_host) {  // float64 whatever the dtype: one rate for both
        for (DType dtype : {DType::kFloat32, DType::kBFloat16})
          t.flops_[{"reference", dtype}] = t.host_reference_;
      }
    }
  }
  if (const double bw = MeasureCopy(context); bw > 0) t.copy_bytes_per_second_ = bw;
  for (const auto& [key, rate] : t.flops_) t.slowest_ = std::min(t.slowest_, rate);
  if (t.flops_.empty()) t.slowest_ = t.host_reference_;
  return t;
}

Throughputs Throughputs::Fixed(std::map<std::pair<std::string, DType>, double> flops_per_second,
                               double copy_bytes_per_second,
                               double host_reference_flops_per_second) {
  Throughputs t;
  t.flops_ = std::move(flops_per_second);
  for (const auto& [key, rate] : t.flops_) t.slowest_ = std::min(t.slowest_, rate);
  t.copy_bytes_per_second_ = copy_bytes_per_second;
  t.host_reference_ = host_reference_flops_per_second;
  return t;
}

double Throughputs::FlopsPerSecond(const std::string& backend, DType dtype) const {
  const DType key = dtype == DType::kFloat16 ? DType::kBFloat16 : dtype;
  auto it = flops_.find({backend, key});
  return it != flops_.end() ? it->second : slowest_;
}

double Throughputs::CallSeconds(const std::string& backend, const AttentionProblem& p) const {
  const AttentionProblem all = WithAllKeys(p);
  return std::max(AttentionFlops(all) / FlopsPerSecond(backend, p.dtype),
                  AttentionMinBytes(all) / copy_bytes_per_second_);
}

std::string Throughputs::ToString() const {
  std::vector<std::string> parts;
  for (const auto& [key, rate] : flops_) {
    parts.push_back(
        absl::StrFormat("%s %s %.3g GFLOP/s", key.first, DTypeName(key.second), rate / 1e9));
  }
  parts.push_back(absl::StrFormat("copy %.3g GB/s", copy_bytes_per_second_ / 1e9));
  parts.push_back(absl::StrFormat("host reference %.3g GFLOP/s", host_reference_ / 1e9));
  return absl::StrJoin(parts, ", ");
}

}  // namespace attn::server
