// The outputs of a benchmark run: the codelab's tables for the terminal, CSV and JSON of every
// case, and a self-contained HTML report with SVG charts. Pure functions of the Report, so tests
// compare them with golden files.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "client/report.h"

namespace attn::client {

// The codelab's tables, one per section, in the order the sections first appear, preceded by
// the "Attention timing" table at the default shape when the run has it, and followed by a
// summary line.
std::string RenderTables(const Report& report);

// JSON values keep their keys in the order they were added.
using Json = nlohmann::ordered_json;

// One header row, then one row per case: the columns of CaseColumns (RFC 4180: CRLF line ends,
// strings quoted with '"' doubled).
std::string RenderCsv(const Report& report);

// {"schema": "attn.bench.v1", "command", "target", "created", "wall_seconds", "server": {...},
//  "options": {...}, "summary": {...}, "cases": [ {one object per case: CaseColumns}, ... ]},
// indented by two spaces.
std::string RenderJson(const Report& report);

// One HTML page, no external assets: charts (latency vs sequence length per backend, vs batch
// size, the default shape's bar chart, FP8 vs bf16), the MHA/GQA/MQA and correctness tables and
// every case.
std::string RenderHtml(const Report& report);

// A case as (column, value) pairs: the one list of columns CSV and JSON share.
std::vector<std::pair<std::string, Json>> CaseColumns(const CaseRecord& record);

// `value` as JSON text (compact, or indented by `indent` spaces); invalid UTF-8 in strings
// becomes U+FFFD, so the text is always valid JSON.
std::string DumpJson(const Json& value, int indent = -1);

}  // namespace attn::client
