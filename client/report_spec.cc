#include "client/report_spec.h"

#include <google/protobuf/descriptor.h>

#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "attn/problem.h"
#include "proto/status.h"

namespace attn::client {

extern const char kReportSpecText[];

namespace {

namespace pb = ::google::protobuf;

// --- a message's columns -----------------------------------------------------------------------

const pb::FieldDescriptor* FieldOf(const pb::Message& m, absl::string_view name) {
  const pb::FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(std::string(name));
  if (f == nullptr) {
    std::fprintf(stderr, "attn-client: report_spec.json names %s.%s, which the proto lacks\n",
                 m.GetDescriptor()->full_name().c_str(), std::string(name).c_str());
    std::abort();  // a defect of the build, caught by the report's tests
  }
  return f;
}

Json Scalar(const pb::Message& m, const pb::FieldDescriptor* f, int i) {
  const pb::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case pb::FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case pb::FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case pb::FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
    case pb::FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case pb::FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
    case pb::FieldDescriptor::CPPTYPE_ENUM:
      return rep ? r->GetRepeatedEnumValue(m, f, i) : r->GetEnumValue(m, f);
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return nullptr;
}

Json Value(const pb::Message& message, const Json& column, const std::string& replica,
           bool exported_only) {
  const std::string path = column.at("path");
  if (path == "@replica") return replica;
  // The message holding the path's last field.
  const std::vector<std::string> parts = absl::StrSplit(path, '.');
  const pb::Message* at = &message;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    at = &at->GetReflection()->GetMessage(*at, FieldOf(*at, parts[i]));
  }
  const pb::FieldDescriptor* f = FieldOf(*at, parts.back());
  const pb::Reflection* r = at->GetReflection();
  if (column.value("optional", false) && !r->HasField(*at, f)) return nullptr;
  if (f->is_repeated()) {
    Json list = Json::array();
    std::set<std::string> seen;
    for (int i = 0; i < r->FieldSize(*at, f); ++i) {
      Json item =
          f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE
              ? Columns(r->GetRepeatedMessage(*at, f, i), column.at("columns"), "", exported_only)
              : Scalar(*at, f, i);
      if (column.contains("unique") &&
          !seen.insert(item[column["unique"].get<std::string>()].dump()).second) {
        continue;
      }
      list.push_back(std::move(item));
    }
    return list;
  }
  Json v = Scalar(*at, f, -1);
  if (column.contains("zero") && v == 0) v = Value(message, {{"path", column["zero"]}}, "", false);
  if (column.contains("empty") && v == "") v = column["empty"];
  const std::string as = column.value("as", "");
  if (as == "enum") {
    const int n = v.get<int>();
    v = n == 0 ? "unspecified"
               : absl::AsciiStrToLower(f->enum_type()->FindValueByNumber(n)->name());
  } else if (as == "code") {
    v = CodeName(CodeFromNumber(v.get<int>()));
  }
  return v;
}

// --- texts -------------------------------------------------------------------------------------

bool Truthy(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return !v.empty();
}

bool Compare(const Json& a, absl::string_view op, const Json& b) {
  if (a.is_null() || b.is_null()) {
    const bool both = a.is_null() && b.is_null();
    return op == "==" ? both : op == "!=" ? !both : false;
  }
  int order;  // -1, 0, 1; 2 for unordered (different kinds, or booleans)
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    order = x < y ? -1 : x > y ? 1 : 0;
  } else if (a.is_string() && b.is_string()) {
    const int c = a.get<std::string>().compare(b.get<std::string>());
    order = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else {
    order = a == b ? 0 : 2;
  }
  if (op == "==") return order == 0;
  if (op == "!=") return order != 0;
  if (order == 2) return false;
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return op == ">=" && order >= 0;
}

std::string Plain(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return v.dump();
  if (v.is_number()) return absl::StrFormat("%g", v.get<double>());
  return v.dump();
}

}  // namespace

const Json& ReportSpec() {
  static const Json* spec = new Json(Json::parse(kReportSpecText));
  return *spec;
}

Json Columns(const pb::Message& message, const Json& columns, const std::string& replica,
             bool exported_only) {
  Json out = Json::object();
  for (const Json& column : columns) {
    if (column.contains("present")) {  // a group: null unless the message has that field
      const std::string field = column["present"];
      const bool has = message.GetReflection()->HasField(message, FieldOf(message, field));
      for (const Json& c : column.at("columns")) {
        out[c.at("name").get<std::string>()] =
            has ? Value(message, c, replica, exported_only) : Json(nullptr);
      }
    } else if (!exported_only || column.value("export", true)) {
      out[column.at("name").get<std::string>()] = Value(message, column, replica, exported_only);
    }
  }
  return out;
}

std::string Format(const Json& value, absl::string_view format) {
  if (value.is_null() || format.empty()) return Plain(value);
  if (format == "kv_lens") return KvLensLabel(value.get<std::vector<int32_t>>());
  if (format == "names") {
    std::string out;
    for (const Json& item : value)
      absl::StrAppend(&out, out.empty() ? "" : ", ", Plain(item["name"]));
    return out;
  }
  if (format == "capitalized") {
    std::string s = Plain(value);
    if (!s.empty()) s[0] = absl::ascii_toupper(static_cast<unsigned char>(s[0]));
    return s;
  }
  const Json& formats = ReportSpec().at("formats");
  const auto it = formats.find(std::string(format));
  if (it == formats.end() || !value.is_number()) return Plain(value);
  const double v = value.get<double>();
  std::string conversion;
  if (it->is_string()) {
    conversion = *it;
  } else {
    for (const Json& step : *it) {
      if (step[0].is_null() || v >= step[0].get<double>()) {
        conversion = step[1];
        break;
      }
    }
  }
  if (conversion.find('%') == std::string::npos) return conversion;
  std::string out;
  const absl::FormatArg args[] = {absl::FormatArg(v)};
  if (!absl::FormatUntyped(&out, absl::UntypedFormatSpec(conversion), args)) return Plain(value);
  return out;
}

Scope Scope::With(const Json& layer) const {
  std::vector<const Json*> layers = {&layer};
  layers.insert(layers.end(), layers_.begin(), layers_.end());
  return Scope(std::move(layers));
}

Json Scope::Lookup(absl::string_view path) const {
  if (const size_t slash = path.find('/'); slash != absl::string_view::npos) {
    const Json a = Lookup(path.substr(0, slash)), b = Lookup(path.substr(slash + 1));
    if (!a.is_number() || !b.is_number() || b.get<double>() == 0) return nullptr;
    return a.get<double>() / b.get<double>();
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(path, '.');
  for (const Json* layer : layers_) {
    const auto it = layer->find(std::string(parts[0]));
    if (it == layer->end()) continue;
    const Json* v = &*it;
    for (size_t i = 1; i < parts.size() && v != nullptr; ++i) {
      size_t index;
      if (v->is_object() && v->contains(std::string(parts[i])))
        v = &(*v)[std::string(parts[i])];
      else if (v->is_array() && absl::SimpleAtoi(parts[i], &index) && index < v->size())
        v = &(*v)[index];
      else
        v = nullptr;
    }
    return v == nullptr ? Json(nullptr) : *v;
  }
  const Json& labels = ReportSpec().at("labels");
  if (const auto it = labels.find(std::string(path)); it != labels.end()) return Text(*it);
  return nullptr;
}

std::string Scope::Text(const Json& text) const {
  if (text.is_array()) {
    std::string out;
    for (const Json& part : text) out += Text(part);
    return out;
  }
  if (text.is_object()) {
    if (Holds(text.at("if").get<std::string>())) return Text(text.at("then"));
    return text.contains("else") ? Text(text["else"]) : "";
  }
  if (!text.is_string()) return "";
  const std::string& s = text.get_ref<const std::string&>();
  std::string out;
  size_t at = 0;
  for (size_t open; (open = s.find('{', at)) != std::string::npos;) {
    const size_t close = s.find('}', open);
    if (close == std::string::npos) break;
    out.append(s, at, open - at);
    const absl::string_view inner(s.data() + open + 1, close - open - 1);
    const size_t colon = inner.find(':');
    out += Format(Lookup(inner.substr(0, colon)),
                  colon == absl::string_view::npos ? "" : inner.substr(colon + 1));
    at = close + 1;
  }
  return out.append(s, at);
}

bool Scope::Holds(absl::string_view condition) const {
  if (condition.empty()) return true;
  const bool any = condition.find(" or ") != absl::string_view::npos;
  for (absl::string_view clause : absl::StrSplit(condition, any ? " or " : " and ")) {
    clause = absl::StripAsciiWhitespace(clause);
    bool holds;
    const size_t space = clause.find(' ');
    if (space == absl::string_view::npos) {
      const bool negated = absl::ConsumePrefix(&clause, "!");
      holds = Truthy(Lookup(clause)) != negated;
    } else {
      const absl::string_view lhs = clause.substr(0, space);
      const absl::string_view rest = clause.substr(space + 1);
      const size_t space2 = rest.find(' ');
      const absl::string_view op = rest.substr(0, space2);
      const absl::string_view rhs = rest.substr(space2 + 1);
      Json value;
      double number;
      if (rhs.size() >= 2 && rhs.front() == '\'' && rhs.back() == '\'')
        value = std::string(rhs.substr(1, rhs.size() - 2));
      else if (rhs == "true" || rhs == "false")
        value = rhs == "true";
      else if (rhs == "null")
        value = nullptr;
      else if (absl::SimpleAtod(rhs, &number))
        value = number;
      else
        value = Lookup(rhs);
      holds = Compare(Lookup(lhs), op, value);
    }
    if (holds == any) return any;
  }
  return !any;
}

}  // namespace attn::client
