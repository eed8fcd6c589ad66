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

}  // namespace

std::string Cost::ToString() const {
  return absl::StrFormat("%s, %.3g GB moved, est. %.3g s of device time", Flops(flops), bytes / 1e9,
                         seconds);
}

double PlannedSeconds(const CallPlan& call, const Throughputs& t) {
  if (call.host_reference) return call.flops / t.host_reference_flops_per_second();
  return t.CallSeconds(call.backend->name(), call.problem);
}

Cost CallCost(const CallPlan& call, const Throughputs& t) {
  Cost c;
  c.flops = call.flops;
  c.bytes = call.bytes;
  c.seconds = c.longest_call_seconds = PlannedSeconds(call, t);
  return c;
}

Cost CaseCost(const CasePlan& plan, const Throughputs& t) {
  const auto seconds = [&t](const CallPlan& call) { return PlannedSeconds(call, t); };
  const double s = std::max(seconds(plan.call), 1e-12);
  Cost c;
  c.seconds = plan.Seconds(seconds);
  c.longest_call_seconds = plan.LongestCallSeconds(seconds);
  c.host_bytes = plan.host_bytes;
  c.flops = plan.call.flops * c.seconds / s;  // every call at the case's own rate
  c.bytes = plan.call.bytes * c.seconds / s;
  return c;
}

double PieceFlops(const Backend& backend, DType dtype, const Throughputs& t) {
  return kPieceSeconds * t.FlopsPerSecond(backend.name(), dtype);
}

absl::Status AdmitCall(const std::string& what, const CallPlan& call, const Cost& cost,
                       const Throughputs& t, const AdmissionLimits& limits) {
  const Backend& backend = *call.backend;
  const AttentionProblem& p = call.problem;
  const double rate = t.FlopsPerSecond(backend.name(), p.dtype);
  if (cost.longest_call_seconds > limits.max_call_seconds) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s: a call of %s on %s costs %s; its longest call is "
        "est. %.3g s of device time at the rates measured at start-up (%s: %.3g GFLOP/s), over "
        "--max_call_seconds=%g; use a smaller shape or a faster backend",
        what, p.ToString(), backend.name(), Flops(call.flops), cost.longest_call_seconds,
        backend.name(), rate / 1e9, limits.max_call_seconds));
  }
  if (!backend.checks_stop_while_running()) {
    const double piece = call.largest_piece_flops / rate;
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
    key_ = std::move(other.key_);
    bytes_ = other.bytes_;
    other.budget_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void HostBudget::Reservation::Release() {
  if (budget_ != nullptr) budget_->Return(key_, bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

void HostBudget::Reservation::Merge(Reservation&& other) {
  if (other.budget_ == nullptr) return;
  if (budget_ == nullptr) {
    *this = std::move(other);
    return;
  }
  bytes_ += other.bytes_;
  other.budget_ = nullptr;
  other.bytes_ = 0;
}

absl::StatusOr<HostBudget::Reservation> HostBudget::Reserve(const std::string& key, int64_t bytes,
                                                            const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = held_.find(key);
  const int64_t mine = it == held_.end() ? 0 : it->second;
  const int64_t holders = static_cast<int64_t>(held_.size()) + (it == held_.end() ? 1 : 0);
  const int64_t share = capacity_ / (holders + 1);
  if (bytes > capacity_ - in_use_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s needs %d bytes of host memory, but %d of the server's %d (--max_host_mib) are held "
        "by requests in flight; retry later, or with a smaller request",
        what, bytes, in_use_, capacity_));
  }
  if (mine + bytes > share) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s needs %d bytes of host memory; %s holds %d, and its share of the server's %d "
        "(--max_host_mib) is %d while %d participant%s hold%s some (1/%d each, a place kept for "
        "the next); retry when your calls in flight finish, or with a smaller request",
        what, bytes, key, mine, capacity_, share, holders, holders == 1 ? "" : "s",
        holders == 1 ? "s" : "", holders + 1));
  }
  in_use_ += bytes;
  held_[key] = mine + bytes;
  Reservation r;
  r.budget_ = this;
  r.key_ = key;
  r.bytes_ = bytes;
  return r;
}

void HostBudget::Return(const std::string& key, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  in_use_ -= bytes;
  const auto it = held_.find(key);
  if (it != held_.end() && (it->second -= bytes) <= 0) held_.erase(it);
}

}  // namespace attn::server
