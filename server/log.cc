#include "server/log.h"

#include <algorithm>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace attn::server {
namespace {

std::atomic<bool> json_format{false};

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
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
        "--log_level: must be trace, debug, info, warning, error, critical or off, got '" + level + "'");
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
    line = absl::StrCat("{\"time\":",
                        JsonString(absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(), absl::UTCTimeZone())),
                        ",\"level\":", JsonString([&] { const auto sv = spdlog::level::to_string_view(level); return std::string(sv.data(), sv.size()); }()),
                        ",\"msg\":", JsonString(message));
    for (const auto& [k, v] : fields) absl::StrAppend(&line, ",", JsonString(k), ":", JsonString(v));
    line += "}";
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
