#include "attn/stop.h"

#include "absl/strings/str_format.h"

namespace attn {

void StopToken::RequestStop(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (requested_.load(std::memory_order_relaxed)) return;
  why_ = why.ok() ? absl::CancelledError("stopped") : why;
  requested_.store(true, std::memory_order_release);
}

absl::Status StopToken::Check() const {
  if (requested_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    return why_;
  }
  if (deadline_ != Clock::time_point::max()) {
    const auto now = Clock::now();
    if (now > deadline_) {
      return absl::DeadlineExceededError(
          absl::StrFormat("deadline passed %.0f ms ago; the call was stopped at its next piece",
                          std::chrono::duration<double, std::milli>(now - deadline_).count()));
    }
  }
  return absl::OkStatus();
}

}  // namespace attn
