// The bounded LRU of built cuDNN graphs that the cudnn and cudnn_fp8 backends keep per
// DeviceContext, with the counters PlanCacheStats reports. Not thread-safe: the owner's mutex
// guards every call.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>

#include "absl/status/statusor.h"
#include "attn/backend.h"

namespace attn {

template <typename Key, typename Plan, typename Hash>
class PlanCache {
 public:
  explicit PlanCache(int64_t capacity) : capacity_(capacity) {}

  // The cached plan for `key`, or the one `build()` (returning absl::StatusOr<Plan>) makes on a
  // miss, timed into the build counters. A failed build is not cached. The least recently used
  // plan is dropped beyond the capacity.
  template <typename Build>
  absl::StatusOr<Plan*> GetOrBuild(const Key& key, Build&& build) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return &it->second->second;
    }
    ++misses_;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Plan> plan = build();
    last_build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    build_seconds_ += last_build_seconds_;
    if (!plan.ok()) return plan.status();
    lru_.emplace_front(key, *std::move(plan));
    index_[key] = lru_.begin();
    if (static_cast<int64_t>(lru_.size()) > capacity_) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return &lru_.front().second;
  }

  // Build time spent outside GetOrBuild (autotuning a cached plan on a call's buffers).
  void AddBuildSeconds(double s) { build_seconds_ += s; }

  PlanCacheStats Stats() const {
    return {hits_, misses_, static_cast<int64_t>(lru_.size()), capacity_, build_seconds_,
            last_build_seconds_};
  }

 private:
  const int64_t capacity_;
  std::list<std::pair<Key, Plan>> lru_;
  std::unordered_map<Key, typename std::list<std::pair<Key, Plan>>::iterator, Hash> index_;
  int64_t hits_ = 0, misses_ = 0;
  double build_seconds_ = 0, last_build_seconds_ = 0;
};

}  // namespace attn
