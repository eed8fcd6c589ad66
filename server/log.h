// Server logging through spdlog: human-readable lines, or one JSON object per line
// (--log_format=json) for log collectors. Request lines carry one key per field either way.
#pragma once

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

}  // namespace attn::server
