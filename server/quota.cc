#include "server/quota.h"

#include "absl/strings/str_format.h"

namespace attn::server {

ParticipantQuotas::Ticket& ParticipantQuotas::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    quotas_ = other.quotas_;
    key_ = std::move(other.key_);
    job_ = other.job_;
    other.quotas_ = nullptr;
  }
  return *this;
}

void ParticipantQuotas::Ticket::Release() {
  if (quotas_ == nullptr) return;
  std::lock_guard<std::mutex> lock(quotas_->mu_);
  auto it = quotas_->states_.find(key_);
  if (it != quotas_->states_.end()) {
    --it->second.inflight;
    if (job_) --it->second.jobs;
    quotas_->Prune(it, Clock::now());
  }
  quotas_ = nullptr;
}

int64_t ParticipantQuotas::Bucket(Clock::time_point t) const {
  const double width = window_ / kBuckets;
  return static_cast<int64_t>(std::chrono::duration<double>(t.time_since_epoch()).count() / width);
}

void ParticipantQuotas::Prune(std::map<std::string, State>::iterator it, Clock::time_point now) {
  State& s = it->second;
  const int64_t oldest = Bucket(now) - kBuckets;
  while (!s.device.empty() && s.device.front().first <= oldest) {
    s.device_sum -= s.device.front().second;
    s.device.pop_front();
  }
  if (s.device.empty()) s.device_sum = 0;
  if (s.inflight == 0 && s.device.empty()) states_.erase(it);
}

std::map<std::string, ParticipantQuotas::State>::iterator ParticipantQuotas::Track(
    const std::string& key, Clock::time_point now) {
  auto it = states_.find(key);
  if (it == states_.end() && states_.size() >= kMaxTracked) {
    for (auto p = states_.begin(); p != states_.end();) Prune(p++, now);
    // Still full: forget a tenth of those without calls in flight, so the scan is paid once
    // per kMaxTracked / 10 new keys.
    for (auto p = states_.begin(); p != states_.end() && states_.size() > kMaxTracked * 9 / 10;) {
      if (p->second.inflight == 0) {
        p = states_.erase(p);
      } else {
        ++p;
      }
    }
  }
  return states_.try_emplace(key).first;
}

absl::StatusOr<ParticipantQuotas::Ticket> ParticipantQuotas::Begin(const std::string& key,
                                                                   const ParticipantLimits& limits,
                                                                   bool job, std::string* reason) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  auto it = Track(key, now);
  Prune(it, now);
  it = Track(key, now);
  State& s = it->second;
  const auto refuse = [&](const char* why, const std::string& what) {
    if (reason != nullptr) *reason = why;
    if (s.inflight == 0 && s.device.empty()) states_.erase(key);
    return absl::ResourceExhaustedError(absl::StrFormat("%s: %s", key, what));
  };
  if (s.inflight >= limits.max_inflight) {
    return refuse("participant_inflight",
                  absl::StrFormat("%d calls in flight; the limit (--participant_max_inflight, or "
                                  "max_inflight in the tokens "
                                  "file) is %d: wait for one to finish",
                                  s.inflight, limits.max_inflight));
  }
  if (job && s.jobs >= limits.max_jobs) {
    return refuse(
        "participant_jobs",
        absl::StrFormat(
            "%d benchmark jobs running; the limit (--participant_max_jobs, or max_jobs) is %d",
            s.jobs, limits.max_jobs));
  }
  if (s.device_sum >= limits.device_seconds) {
    const double wait =
        s.device.empty()
            ? 0
            : static_cast<double>(s.device.front().first + kBuckets + 1 - Bucket(now)) *
                  (window_ / kBuckets);
    return refuse(
        "participant_device_time",
        absl::StrFormat("held the device for %.1f s in the last %g s; the limit "
                        "(--participant_device_seconds, or "
                        "device_seconds) is %g s: retry in %.0f s",
                        s.device_sum, window_, limits.device_seconds, std::max(1.0, wait)));
  }
  ++s.inflight;
  if (job) ++s.jobs;
  Ticket t;
  t.quotas_ = this;
  t.key_ = key;
  t.job_ = job;
  return t;
}

void ParticipantQuotas::AddDeviceSeconds(const std::string& key, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  auto it = Track(key, now);
  const int64_t bucket = Bucket(now);
  if (!it->second.device.empty() && it->second.device.back().first == bucket) {
    it->second.device.back().second += seconds;
  } else {
    it->second.device.emplace_back(bucket, seconds);
  }
  it->second.device_sum += seconds;
  Prune(it, now);
}

double ParticipantQuotas::DeviceSecondsInWindow(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = states_.find(key);
  if (it == states_.end()) return 0;
  Prune(it, Clock::now());
  it = states_.find(key);
  return it == states_.end() ? 0 : it->second.device_sum;
}

size_t ParticipantQuotas::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return states_.size();
}

}  // namespace attn::server
