// Per-participant admission: calls in flight, live benchmark jobs and device time in a rolling
// window. Over a limit: RESOURCE_EXHAUSTED naming the limit and its value, before the request
// queues, without touching anyone else's queue position. (Tasks queued and running per
// participant are the scheduler's: scheduler.h.)
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "server/auth.h"

namespace attn::server {

class ParticipantQuotas {
 public:
  using Clock = std::chrono::steady_clock;

  // Holds one call's place until destroyed (or Release()d).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }
    void Release();

   private:
    friend class ParticipantQuotas;
    ParticipantQuotas* quotas_ = nullptr;
    std::string key_;
    bool job_ = false;
  };

  explicit ParticipantQuotas(double window_s) : window_(window_s) {}

  // A call of participant `key` begins (a benchmark job when `job`): refused when the
  // participant has limits.max_inflight calls in flight, limits.max_jobs live jobs (jobs), or has
  // held device workers for limits.device_seconds in the last window.
  // `reason`, when given, is set to the refusal's metrics label (participant_inflight, ...).
  absl::StatusOr<Ticket> Begin(const std::string& key, const ParticipantLimits& limits, bool job,
                               std::string* reason = nullptr);

  // Seconds a task of `key` held a device worker.
  void AddDeviceSeconds(const std::string& key, double seconds);
  double DeviceSecondsInWindow(const std::string& key);

  // Participants with state now (calls in flight or device time in the window): bounded.
  size_t tracked() const;

 private:
  // Device time is kept in kBuckets buckets of window / kBuckets seconds, so a participant's
  // state has a fixed size however many calls it makes; at most kMaxTracked participants are
  // kept (client keys without tokens are chosen by callers): past that, a tenth of those
  // without calls in flight are forgotten (their device time with them).
  static constexpr int kBuckets = 60;
  static constexpr size_t kMaxTracked = 10000;
  struct State {
    int inflight = 0;
    int jobs = 0;
    std::deque<std::pair<int64_t, double>> device;  // (bucket number, seconds), oldest first
    double device_sum = 0;
  };
  int64_t Bucket(Clock::time_point t) const;
  // Drops buckets older than the window; erases a participant with nothing left.
  void Prune(std::map<std::string, State>::iterator it, Clock::time_point now);
  // The state of `key`, made room for when the table is full.
  std::map<std::string, State>::iterator Track(const std::string& key, Clock::time_point now);

  const double window_;
  mutable std::mutex mu_;
  std::map<std::string, State> states_;
};

}  // namespace attn::server
