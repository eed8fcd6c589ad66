#include "client/args.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace attn::client {
namespace {

std::string Normalize(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

bool ParsedArgs::Has(const std::string& name) const {
  auto it = given_.find(name);
  return it != given_.end() && it->second;
}

std::string ParsedArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? "" : it->second;
}

bool ParsedArgs::GetBool(const std::string& name) const {
  const std::string v = absl::AsciiStrToLower(Get(name));
  return v == "true" || v == "1" || v == "yes";
}

absl::StatusOr<int64_t> ParsedArgs::GetInt(const std::string& name) const {
  int64_t v = 0;
  if (!absl::SimpleAtoi(Get(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Dashed(name), ": expected an integer; got '", Get(name), "'"));
  }
  return v;
}

absl::StatusOr<double> ParsedArgs::GetDouble(const std::string& name) const {
  double v = 0;
  if (!absl::SimpleAtod(Get(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", Dashed(name), ": expected a number; got '", Get(name), "'"));
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> ParsedArgs::GetIntList(const std::string& name) const {
  std::vector<int64_t> out;
  for (absl::string_view item : absl::StrSplit(Get(name), ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(item, &v) || v <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", Dashed(name), ": expected a comma list of integers > 0; got '", Get(name), "'"));
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> ParsedArgs::GetList(const std::string& name) const {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(Get(name), ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return out;
}

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args) {
  ParsedArgs parsed;
  std::map<std::string, const OptionSpec*> by_name;
  for (const auto& s : specs) {
    by_name[s.name] = &s;
    parsed.values_[s.name] = s.default_value;
  }
  parsed.values_["help"] = "false";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 3 || arg.rfind("--", 0) != 0) {
      parsed.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    name = Normalize(name);
    if (name == "help") {
      parsed.values_["help"] = "true";
      continue;
    }
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", Dashed(name), ": unknown option"));
    }
    if (!has_value) {
      if (it->second->value_name.empty()) {
        value = "true";  // a bare switch
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("--", Dashed(name), ": needs a value (", it->second->value_name, ")"));
      }
    }
    parsed.values_[name] = value;
    parsed.given_[name] = true;
  }
  return parsed;
}

std::string OptionsHelp(const std::vector<OptionSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    std::string left = "  --" + Dashed(s.name);
    if (!s.value_name.empty()) left += "=" + s.value_name;
    std::string help = s.help;
    if (!s.default_value.empty() && !s.value_name.empty()) {
      help += " (default: " + s.default_value + ")";
    }
    out += absl::StrFormat("%-30s %s\n", left, help);
  }
  return out;
}

std::string RecordedCommandLine(const std::vector<std::string>& words,
                                const std::vector<OptionSpec>& specs) {
  const auto secret = [](const std::string& name) {
    for (const char* word : {"token", "secret", "key", "password"}) {
      if (absl::StrContains(absl::AsciiStrToLower(name), word)) return true;
    }
    return false;
  };
  const auto takes_value = [&](const std::string& name) {
    for (const auto& s : specs) {
      if (s.name == name) return !s.value_name.empty();
    }
    return false;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.size() < 3 || w.rfind("--", 0) != 0) {
      out.push_back(w);
      continue;
    }
    const size_t eq = w.find('=');
    const std::string name = Normalize(w.substr(2, eq == std::string::npos ? eq : eq - 2));
    if (!secret(name)) {
      out.push_back(w);
    } else if (eq != std::string::npos) {
      out.push_back(w.substr(0, eq + 1) + "<redacted>");
    } else {
      out.push_back(w);
      if (takes_value(name) && i + 1 < words.size()) {
        out.push_back("<redacted>");
        ++i;
      }
    }
  }
  return absl::StrJoin(out, " ");
}

}  // namespace attn::client
