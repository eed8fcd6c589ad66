#include "server/log.h"

#include <algorithm>
#include <atomic>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace attn::server {
namespace {

std::atomic<bool> json_format{false};

// A JSON string literal; invalid UTF-8 becomes U+FFFD, so a line is always valid JSON.
std::string JsonString(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Text values with spaces or quotes are quoted so a line splits back into its fields.
std::string TextValue(const std::string& s) {
  if (!s.empty() && s.find_first_of(" \"=") == std::string::npos) return s;
  return JsonString(s);
}

}  // namespace

absl::Status InitLogging(const std::string& format, const std::string& level) {
  if (format != "text" && format != "json") {
    return absl::InvalidArgumentError("--log_format: must be text or json, got '" + format + "'");
  }
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        "--log_level: must be trace, debug, info, warning, error, critical or off, got '" + level +
        "'");
  }
  json_format = format == "json";
  // JSON lines are whole objects built in Log(); text lines get spdlog's time and level.
  spdlog::set_pattern(json_format ? "%v" : "[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  spdlog::set_level(lvl);
  spdlog::flush_on(spdlog::level::info);
  return absl::OkStatus();
}

void Log(spdlog::level::level_enum level, const std::string& message, const LogFields& fields) {
  if (!spdlog::should_log(level)) return;
  std::string line;
  if (json_format) {
    const auto level_name = spdlog::level::to_string_view(level);
    nlohmann::ordered_json doc = {
        {"time", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone())},
        {"level", std::string(level_name.data(), level_name.size())},
        {"msg", message}};
    for (const auto& [k, v] : fields) doc[k] = v;
    line = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = message;
    for (const auto& [k, v] : fields) absl::StrAppend(&line, " ", k, "=", TextValue(v));
  }
  spdlog::log(level, "{}", line);
}

bool LogRateLimit::Allow(int64_t* suppressed) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
  last_ = now;
  if (tokens_ < 1) {
    ++dropped_;
    return false;
  }
  tokens_ -= 1;
  *suppressed = dropped_;
  dropped_ = 0;
  return true;
}

}  // namespace attn::server
