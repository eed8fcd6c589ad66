#include "server/admission.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "attn/attention.h"

namespace attn::server {
namespace {

std::string Flops(double f) {
  if (f >= 1e12) return absl::StrFormat("%.3g TFLOP", f / 1e12);
  if (f >= 1e9) return absl::StrFormat("%.3g GFLOP", f / 1e9);
  return absl::StrFormat("%.3g MFLOP", f / 1e6);
}

// Host bytes the numerics check holds for a case of `p` (runner.cc's CheckNumerics): the
// backend's output (and the unmasked and cuDNN outputs it is compared with), and the reference's
// float32 inputs and output plus the cpu backend's float64 workspace, or naive's float32 output.
int64_t CheckHostBytes(const AttentionProblem& p) {
  const int64_t e = DTypeSize(p.dtype);
  const int64_t q = QueryElements(p), kv = KeyValueElements(p);
  const int64_t outputs = 3 * q * e;
  if (NumericsOnHost(p)) {
    return outputs + (q + 2 * kv) * (4 + 8) + std::max(q, kv) * e + q * 4;
  }
  return outputs + q * 4;
}

}  // namespace

std::string Cost::ToString() const {
  return absl::StrFormat("%s, %.3g GB moved, est. %.3g s of device time", Flops(flops), bytes / 1e9,
                         seconds);
}

Cost CallCost(const AttentionProblem& p, const Backend& backend, const Throughputs& t) {
  Cost c;
  c.flops = AttentionFlops(WithAllKeys(p));
  c.bytes = AttentionMinBytes(WithAllKeys(p));
  c.seconds = c.longest_call_seconds = t.CallSeconds(backend.name(), p);
  return c;
}

Cost CaseCost(const AttentionProblem& p, const Backend& backend, const BenchOptions& o,
              const Throughputs& t) {
  const Cost call = CallCost(p, backend, t);
  const double s = call.seconds, budget = o.case_budget_s;
  const double per_sample = o.cuda_graph ? o.graph_calls : 1;
  // Calls: warm-up (cut at half the budget), one to size graph replays, the timed ones (cut at
  // the budget, checked every kCheckEveryMs or one sample).
  const double warm = std::min(o.warmup * s, budget / 2 + s);
  const double timed =
      std::min(o.repeats * per_sample * s, budget + std::max(kCheckEveryMs / 1e3, per_sample * s));
  Cost c;
  c.seconds = warm + s + timed;
  c.longest_call_seconds = s;
  if (o.check_numerics) {
    // The checked call, the unmasked call of a causal case, cuDNN's call beside an FP8 one.
    c.seconds += s * (1 + (p.causal ? 1 : 0) + (backend.takes_fp8_recipe() ? 1 : 0));
    double reference = 0;
    AttentionProblem f32 = p;
    f32.dtype = DType::kFloat32;
    if (NumericsOnHost(p)) {
      reference = AttentionFlops(WithAllKeys(p)) / t.host_reference_flops_per_second();
    } else {
      reference = t.CallSeconds("naive", f32);
    }
    c.seconds += reference;
    c.longest_call_seconds = std::max(s, reference);
    c.host_bytes = CheckHostBytes(p);
  }
  c.flops = call.flops * c.seconds / std::max(s, 1e-12);  // every call at the case's own rate
  c.bytes = call.bytes * c.seconds / std::max(s, 1e-12);
  return c;
}

double PieceFlops(const Backend& backend, DType dtype, const Throughputs& t) {
  return kPieceSeconds * t.FlopsPerSecond(backend.name(), dtype);
}

absl::Status AdmitCall(const std::string& what, const AttentionProblem& p, const Backend& backend,
                       const Cost& cost, const Throughputs& t, const AdmissionLimits& limits) {
  const double rate = t.FlopsPerSecond(backend.name(), p.dtype);
  if (cost.longest_call_seconds > limits.max_call_seconds) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: a call of %s on %s costs %s; its longest call is "
        "est. %.3g s of device time at the rates measured at start-up (%s: %.3g GFLOP/s), over "
        "--max_call_seconds=%g; use a smaller shape or a faster backend",
        what, p.ToString(), backend.name(), Flops(AttentionFlops(WithAllKeys(p))),
        cost.longest_call_seconds, backend.name(), rate / 1e9, limits.max_call_seconds));
  }
  if (!backend.checks_stop_while_running()) {
    const double piece = LargestPieceFlops(p, PieceFlops(backend, p.dtype, t)) / rate;
    if (piece > kMaxPieceSeconds) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: one causal head of %s on %s is est. %.3g s of device time, and a causal head runs "
          "as one piece that cannot stop part-way (at most %g s); use fewer query or key "
          "positions, or an unmasked problem",
          what, p.ToString(), backend.name(), piece, kMaxPieceSeconds));
    }
  }
  return absl::OkStatus();
}

absl::Status AdmitJob(const Cost& total, int cases, const AdmissionLimits& limits) {
  if (total.seconds > limits.max_job_seconds) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "job: %d cases cost %s, over --max_job_seconds=%g; run fewer cases, fewer repeats or a "
        "smaller case_budget_seconds",
        cases, total.ToString(), limits.max_job_seconds));
  }
  return absl::OkStatus();
}

HostBudget::Reservation& HostBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = other.budget_;
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void HostBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->in_use_ -= bytes_;
  budget_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<HostBudget::Reservation> HostBudget::Reserve(int64_t bytes,
                                                            const std::string& what) {
  int64_t used = in_use_.load();
  do {
    if (bytes > capacity_ - used) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s needs %d bytes of host memory, but %d of the server's %d (--max_host_mib) are held "
          "by requests in flight; retry later, or with a smaller request",
          what, bytes, used, capacity_));
    }
  } while (!in_use_.compare_exchange_weak(used, used + bytes));
  Reservation r;
  r.budget_ = this;
  r.bytes_ = bytes;
  return r;
}

}  // namespace attn::server
