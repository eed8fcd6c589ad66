// The report's one definition, client/report_spec.json (compiled in; attn_client reads the same
// file), and what reads it by the rules its "about" states: a message's fields as the spec's
// columns, texts with placeholders and conditions, and the formats of numbers.
#pragma once

#include <google/protobuf/message.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "attn/records.h"

namespace attn::client {

// The parsed spec.
const Json& ReportSpec();

// `message`'s values by `columns` (the spec's column definitions) as one JSON object; `replica`
// is the '@replica' column. `exported_only` leaves out the columns marked "export": false.
Json Columns(const google::protobuf::Message& message, const Json& columns,
             const std::string& replica = "", bool exported_only = false);

// `value` as the spec's `format` writes it ("" and null: as plain text).
std::string Format(const Json& value, absl::string_view format);

// Where texts and conditions look their fields up: JSON objects searched in order, then the
// spec's labels. A scope points at its layers; they must outlive it.
class Scope {
 public:
  explicit Scope(std::vector<const Json*> layers) : layers_(std::move(layers)) {}
  // This scope with `layer` searched first.
  Scope With(const Json& layer) const;

  Json Lookup(absl::string_view path) const;
  std::string Text(const Json& text) const;
  bool Holds(absl::string_view condition) const;

 private:
  std::vector<const Json*> layers_;
};

}  // namespace attn::client
