#include "attn/records.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace attn {
namespace {

Json Number(double v) {
  if (!std::isfinite(v)) return nullptr;
  const double rounded = std::strtod(absl::StrFormat("%.6g", v).c_str(), nullptr);
  if (rounded == std::trunc(rounded) && std::fabs(rounded) < 1e15) {
    return static_cast<int64_t>(rounded);
  }
  return rounded;
}

std::string Dump(const Json& value, int indent) {
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

std::string CsvField(const Json& value) {
  const Json v = RecordValue(value);
  if (v.is_null()) return "";
  if (v.is_string()) {
    return absl::StrCat("\"", absl::StrReplaceAll(v.get<std::string>(), {{"\"", "\"\""}}), "\"");
  }
  return Dump(v, -1);
}

}  // namespace

Json RecordValue(const Json& value) {
  if (value.is_number_float()) return Number(value.get<double>());
  if (!value.is_structured()) return value;
  Json out = value.is_array() ? Json::array() : Json::object();
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (value.is_array())
      out.push_back(RecordValue(*it));
    else
      out[it.key()] = RecordValue(*it);
  }
  return out;
}

std::string RecordsCsv(const std::vector<std::string>& columns, const std::vector<Json>& records) {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) absl::StrAppend(&out, i ? "," : "", columns[i]);
  out += "\r\n";
  for (const Json& record : records) {
    for (size_t i = 0; i < columns.size(); ++i) {
      const auto it = record.find(columns[i]);
      absl::StrAppend(&out, i ? "," : "", it == record.end() ? "" : CsvField(*it));
    }
    out += "\r\n";
  }
  return out;
}

std::string RecordsJson(const Json& value, int indent) { return Dump(RecordValue(value), indent); }

}  // namespace attn
