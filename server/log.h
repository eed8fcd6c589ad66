// Server logging through spdlog: human-readable lines, or one JSON object per line
// (--log_format=json) for log collectors. Request lines carry one key per field either way.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace attn::server {

// Sets the default logger's format ("text" or "json") and level ("trace" .. "off").
// InvalidArgument naming the flag for other values.
absl::Status InitLogging(const std::string& format, const std::string& level);

// One line: `message`, then key=value pairs (text) or one JSON object with "msg" and the keys.
using LogFields = std::vector<std::pair<std::string, std::string>>;
void Log(spdlog::level::level_enum level, const std::string& message, const LogFields& fields = {});

// A token bucket for log lines a client can trigger at will (refused requests): at most `burst`
// at once and `per_second` after, so a flood of refusals cannot flood the log (or the CPU that
// writes it); metrics still count every one.
class LogRateLimit {
 public:
  LogRateLimit(double per_second, double burst)
      : rate_(per_second), burst_(burst), tokens_(burst) {}
  // True when a line may be written now; `suppressed` is then set to the lines dropped since the
  // last one written.
  bool Allow(int64_t* suppressed);

 private:
  const double rate_, burst_;
  std::mutex mu_;
  double tokens_;
  int64_t dropped_ = 0;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace attn::server
