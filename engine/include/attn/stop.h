// Why and when running work must stop: a deadline, or a reason given from another thread (the
// client cancelled, the server is shutting down). Long calls check it between their pieces.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>

#include "absl/status/status.h"

namespace attn {

class StopToken {
 public:
  using Clock = std::chrono::steady_clock;

  // Stops only when asked (RequestStop) or, with a deadline, once it has passed.
  StopToken() = default;
  explicit StopToken(Clock::time_point deadline) : deadline_(deadline) {}
  StopToken(const StopToken&) = delete;
  StopToken& operator=(const StopToken&) = delete;

  // Asks the work to stop with `why` (e.g. CancelledError("cancelled by the client")); the first
  // reason given stays. Thread-safe; `why` must not be OK.
  void RequestStop(const absl::Status& why);

  // OK while the work may go on; otherwise why it must stop: the reason given to RequestStop,
  // or DeadlineExceeded once the deadline has passed (whichever came first). Cheap: an atomic
  // load and, with a deadline, a clock read.
  absl::Status Check() const;

  Clock::time_point deadline() const { return deadline_; }

 private:
  const Clock::time_point deadline_ = Clock::time_point::max();
  std::atomic<bool> requested_{false};
  mutable std::mutex mu_;
  absl::Status why_;
};

// Check() of `stop`, or OK when there is none.
inline absl::Status CheckStop(const StopToken* stop) {
  return stop == nullptr ? absl::OkStatus() : stop->Check();
}

}  // namespace attn
