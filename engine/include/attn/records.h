// Results as files: CSV and JSON written by one set of rules, for attn-bench and attn-client
// alike. Values are nlohmann-json values; a record is a JSON object of (column, value).
//   numbers  6 significant digits (the tables' precision), integral values as integers, NaN and
//            infinities as null;
//   CSV      RFC 4180: a header row, CRLF line ends, strings quoted with '"' doubled (commas,
//            quotes and line breaks stay inside the quotes), null empty, numbers and booleans
//            as JSON writes them;
//   JSON     invalid UTF-8 in strings becomes U+FFFD, so the text is always valid JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attn {

// JSON values keep their keys in the order they were added.
using Json = nlohmann::ordered_json;

// `value` with every number in it as the rules above write it.
Json RecordValue(const Json& value);

// A header row of `columns`, then a row per record: its values in the columns' order (a
// column the record lacks is empty).
std::string RecordsCsv(const std::vector<std::string>& columns, const std::vector<Json>& records);

// `value` (a record, a list of them, a document) as JSON text: compact, or indented by `indent`
// spaces.
std::string RecordsJson(const Json& value, int indent = -1);

}  // namespace attn
