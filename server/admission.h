// Cost admission: what a request will cost, computed before it takes a queue slot, and the caps
// it is held to. A request over a cap is refused with RESOURCE_EXHAUSTED naming its cost, the cap
// and the flag that sets it; nothing of it has queued or run.
//
// Estimates use the throughputs measured at start-up (throughput.h) on calls too small to fill a
// GPU, so they err long: the caps bound the worst case a request can hold a device, and the
// deadline and the pieces (RunOptions::stop) bound what a running call actually takes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/backend.h"
#include "attn/bench.h"
#include "attn/plan.h"
#include "attn/problem.h"
#include "server/throughput.h"

namespace attn::server {

// The server's cost caps (flags --max_call_seconds, --max_job_seconds, --max_host_mib).
struct AdmissionLimits {
  // Estimated device time of one attention call: an Attend, one call of a benchmark case, or a
  // case's numerics reference. Sized so the codelab and large suites pass on an L4 with room
  // (their longest call there is well under a second) and a CPU server's codelab suite passes
  // (its longest call is a few seconds on two cores).
  double max_call_seconds = 30;
  // Estimated device time of a whole benchmark job (every case's warm-up, timing and check, as
  // the runner bounds them by the case budget), and the longest deadline any request may have:
  // a later client deadline is cut to this. The large suite needs ~1.5 min on an L4.
  double max_job_seconds = 600;
  // Host memory held by requests at once: every request as held and its replies, benchmark
  // jobs' cases, unread events and numerics checks. One participant holds at most a share
  // (HostBudget).
  int64_t max_host_bytes = int64_t{4} << 30;
};

// Device time a piece of a long call targets: two pieces queued keep a stop within ~0.1 s.
inline constexpr double kPieceSeconds = 0.05;
// The longest a piece may be estimated to take: one causal head cannot be split (PlanPieces),
// so a call whose head alone would hold the device longer is refused up front.
inline constexpr double kMaxPieceSeconds = 1.0;

struct Cost {
  double flops = 0;        // every attention call's FLOPs
  double bytes = 0;        // the fewest bytes those calls move through device memory
  int64_t host_bytes = 0;  // host memory held while it runs
  double seconds = 0;      // estimated device time in all
  double longest_call_seconds = 0;
  // "2.20 TFLOP, 1.07 GB moved, est. 93.2 s of device time"
  std::string ToString() const;
};

// Estimated seconds of one planned call at the rates measured at start-up: a backend's call at
// its rate (Throughputs::CallSeconds), the float64 reference at the host's.
double PlannedSeconds(const CallPlan& call, const Throughputs& t);

// One planned call: its FLOPs, bytes and estimated time.
Cost CallCost(const CallPlan& call, const Throughputs& t);

// A benchmark case as the runner runs its plan (CasePlan::Seconds): every call it makes, its
// longest call, and the host memory its numerics check holds.
Cost CaseCost(const CasePlan& plan, const Throughputs& t);

// The FLOPs of one piece of `backend`'s calls on `dtype`: kPieceSeconds at its measured rate.
double PieceFlops(const Backend& backend, DType dtype, const Throughputs& t);

// RESOURCE_EXHAUSTED when `cost` has a call over max_call_seconds, or when `call`'s largest piece
// (one causal head cannot be split) is estimated over kMaxPieceSeconds on a backend that does not
// check its stop while running; `what` names the request part ("Attend", "cases[3]").
absl::Status AdmitCall(const std::string& what, const CallPlan& call, const Cost& cost,
                       const Throughputs& t, const AdmissionLimits& limits);

// RESOURCE_EXHAUSTED when a job's total cost is over max_job_seconds.
absl::Status AdmitJob(const Cost& total, int cases, const AdmissionLimits& limits);

// Host memory shared by the requests in flight, split fairly: a participant may hold at most
// capacity / (n + 1), n the participants holding some (itself included), so one holding alone
// takes at most half and whoever comes next finds room. Reservations are RAII and release on
// destruction.
class HostBudget {
 public:
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation() { Release(); }
    void Release();
    // Takes over `other`'s bytes (a later reservation of the same participant on the same
    // budget), so one reservation holds a request's whole charge.
    void Merge(Reservation&& other);
    int64_t bytes() const { return bytes_; }

   private:
    friend class HostBudget;
    HostBudget* budget_ = nullptr;
    std::string key_;
    int64_t bytes_ = 0;
  };

  explicit HostBudget(int64_t capacity) : capacity_(capacity) {}
  // Takes `bytes` for participant `key` (`what`: what needs them), or RESOURCE_EXHAUSTED naming
  // the need, the participant's share or what is in use, and the flag.
  absl::StatusOr<Reservation> Reserve(const std::string& key, int64_t bytes,
                                      const std::string& what);

 private:
  void Return(const std::string& key, int64_t bytes);

  const int64_t capacity_;
  mutable std::mutex mu_;
  int64_t in_use_ = 0;
  std::map<std::string, int64_t> held_;  // per participant with some held
};

}  // namespace attn::server
